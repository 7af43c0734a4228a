"""The metric catalogue follows Prometheus naming rules and covers Spark's custom metric keys."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.catalogue import Kind
from sparkwatch.metrics.custom import KNOWN, MS, split_instance_key
from tests.conftest import FIXTURES, ROOT, unavailable


def _reference() -> Path:
    """The project's background reading (``shared/`` beside the checkout); a clone elsewhere finds
    it through SPARKWATCH_SHARED_DIR or the workspace's ``/work/shared``."""
    relative = Path("docs") / "spark-progress-reference.md"
    override = os.environ.get("SPARKWATCH_SHARED_DIR")
    candidates = [Path(override)] if override else []
    candidates += [ROOT.parent / "shared", Path("/work/shared")]
    found = [c / relative for c in candidates if (c / relative).exists()]
    return found[0] if found else candidates[0] / relative


REFERENCE = _reference()
NAMES = [m.name for m in cat.ALL]


def test_every_name_has_the_prefix() -> None:
    assert [n for n in NAMES if not n.startswith("spark_streaming_")] == []


def test_total_suffix_only_and_always_on_counters() -> None:
    for m in cat.ALL:
        assert m.name.endswith("_total") == (m.kind is Kind.COUNTER), m.name


def test_info_metrics_end_in_info() -> None:
    for m in cat.ALL:
        assert m.name.endswith("_info") == (m.kind is Kind.INFO), m.name


@pytest.mark.parametrize(
    "unit",
    [
        "_ms",
        "_millis",
        "_milliseconds",
        "_kb",
        "_kilobytes",
        "_mb",
        "_minutes",
        "_hours",
        "_microseconds",
    ],
)
def test_units_are_base_units(unit: str) -> None:
    assert [n for n in NAMES if re.search(f"{unit}(_|$)", n)] == []


def test_every_duration_metric_is_in_seconds() -> None:
    timed = [n for n in NAMES if re.search(r"_(time|duration|latency)(_|$)", n)]
    assert timed, "the catalogue has duration metrics"
    assert [n for n in timed if "_seconds" not in n] == []


def test_run_id_label_only_on_query_info() -> None:
    assert [m.name for m in cat.ALL if "run_id" in m.labels] == ["spark_streaming_query_info"]


def test_no_duplicate_names_or_families() -> None:
    assert len(NAMES) == len(set(NAMES))
    families = [m.family for m in cat.ALL]
    assert len(families) == len(set(families))


def test_names_and_labels_are_valid_prometheus_identifiers() -> None:
    for m in cat.ALL:
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", m.name), m.name
        assert len(m.labels) == len(set(m.labels)), m.name
        for label in m.labels:
            assert re.fullmatch(r"[a-z_][a-z0-9_]*", label) and not label.startswith("__"), label
        assert m.help.strip() and m.help.endswith((".", ")")), m.name


def test_histograms_do_not_use_reserved_suffixes() -> None:
    for m in cat.ALL:
        assert not m.name.endswith(("_bucket", "_count", "_sum", "_created")), m.name


def test_counter_custom_metrics_convert_ms_to_seconds() -> None:
    for key, custom in KNOWN.items():
        ms_key = key.endswith(("Latency", "Ms"))
        assert (custom.scale == MS) == ms_key, key
        if ms_key:
            assert "_seconds" in custom.metric.name, key


def reference_custom_keys() -> set[str]:
    """customMetrics keys listed in section 6 of the reference (provider and operator lines)."""
    if not REFERENCE.exists():
        unavailable(f"reference doc not found at {REFERENCE}")
    text = REFERENCE.read_text()
    section = text.split("## 6.", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for line in re.split(r"\n(?=- )", section):
        if not line.startswith(("- HDFS provider", "- RocksDB provider", "- Operator-level")):
            continue
        line = _expand_braces(line.replace("\n", " "))
        # camelCase words that are not a heading like "transformWithState:" or "dedupe:".
        keys |= set(re.findall(r"\b([a-z][a-z0-9]*[A-Z][A-Za-z0-9]*)\b(?!:)", line))
    return keys


def _expand_braces(text: str) -> str:
    """``num{Value,List}StateVars`` -> ``numValueStateVars, numListStateVars``."""
    pattern = re.compile(r"(\w*)\{([^}]*)\}(\w*)")
    while (match := pattern.search(text)) is not None:
        head, options, tail = match.groups()
        words = ", ".join(f"{head}{option.strip()}{tail}" for option in options.split(","))
        text = text[: match.start()] + words + text[match.end() :]
    return text


def test_reference_parsing_finds_the_listed_keys() -> None:
    keys = reference_custom_keys()
    assert {
        "rocksdbGetLatency",
        "stateOnCurrentVersionSizeBytes",
        "numMapStateWithTTLVars",
        "numRowsIncrementallyRemoved",
        "rocksdbForceSnapshotCount",
    } <= keys
    assert len(keys) >= 60


def test_every_custom_key_of_the_reference_is_known() -> None:
    assert sorted(reference_custom_keys() - set(KNOWN)) == []


def test_every_custom_key_spark_really_sent_is_known_or_per_instance() -> None:
    seen = {
        key
        for path in FIXTURES.glob("spark-*/*.json")
        for progress in json.loads(path.read_text())["progress"]
        for op in progress["stateOperators"]
        for key in op.get("customMetrics", {})
    }
    assert len(seen) > 40
    assert sorted(k for k in seen if k not in KNOWN and split_instance_key(k) is None) == []


def test_known_custom_metrics_carry_operator_labels_and_provider() -> None:
    for key, custom in KNOWN.items():
        assert custom.key == key
        assert custom.metric.labels == cat.OPERATOR_LABELS, key
        assert custom.provider in {"rocksdb", "hdfs", "operator"}, key
        assert custom.metric.source == f"customMetrics.{key}"
