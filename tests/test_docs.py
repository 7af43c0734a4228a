"""docs/metrics.md is generated from the catalogue and committed up to date."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics import docs
from sparkwatch.metrics.custom import KNOWN
from tests.conftest import ROOT

COMMITTED = ROOT / "docs" / "metrics.md"


def test_committed_metrics_doc_equals_the_render() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == docs.render_metrics_markdown(), (
        "docs/metrics.md is stale: run python -m sparkwatch.metrics.docs"
    )


def test_every_metric_is_documented_in_exactly_one_group() -> None:
    grouped = [m.name for _, _, metrics in docs.grouped_metrics() for m in metrics]
    assert sorted(grouped) == sorted(m.name for m in cat.ALL)


def test_every_metric_has_a_table_row_with_its_type() -> None:
    text = docs.render_metrics_markdown()
    for m in cat.ALL:
        assert f"| `{m.name}` | {m.kind.value} |" in text, m.name


def test_every_known_custom_key_has_a_row_with_its_conversion() -> None:
    text = docs.render_metrics_markdown()
    assert (
        "| `rocksdbCommitFileSyncLatencyMs` | `spark_streaming_state_rocksdb_commit_file_sync_"
        "seconds_total` | counter | ms → s (× 0.001) | rocksdb | all |" in text
    )
    assert (
        "| `numRowsReadDuringEviction` | `spark_streaming_state_rows_read_during_eviction_"
        "total` | counter | none | operator | 4.3 |" in text
    )
    for key in KNOWN:
        assert f"| `{key}` |" in text, key


def test_operator_labels_are_named_by_set_with_extras() -> None:
    assert docs.render_labels(cat.STATE_CUSTOM_METRIC.labels) == "*operator* + `metric`"
    assert docs.render_labels(cat.QUERY_INFO.labels) == "*query* + `run_id`"
    assert docs.render_labels(("x", "y")) == "`x`, `y`"


def test_angle_brackets_and_pipes_cannot_break_the_tables() -> None:
    text = docs.render_metrics_markdown()
    prose = re.sub(r"`[^`]*`", "", text.split("-->", 1)[1])
    assert "<" not in prose and ">" not in prose.replace("→", "")
    assert docs._cell("a|b<c>") == "a\\|b&lt;c&gt;"
    metrics, idle = text.split("## While a query is idle", 1)
    for line in metrics.splitlines():
        if line.startswith("| `spark_streaming_"):
            assert line.count(" | ") == 5, line  # six columns
    for line in idle.split("\n## ", 1)[0].splitlines():
        if line.startswith("| `spark_streaming_"):
            assert line.count(" | ") == 1, line  # name, while idle


def test_every_last_batch_gauge_says_what_it_shows_while_idle() -> None:
    from sparkwatch.metrics.catalogue import Kind

    last_batch = [m for m in cat.ALL if m.kind is Kind.GAUGE and (
        "last_batch" in m.name or "per_second" in m.name or "(last batch)" in m.help)]
    assert len(last_batch) >= 12
    assert [m.name for m in last_batch if not m.idle] == []
    section = docs.render_metrics_markdown().split("## While a query is idle", 1)[1]
    for m in last_batch:
        assert f"| `{m.name}` | {docs._cell(m.idle)} |" in section
    assert "| `spark_streaming_query_input_rows_per_second` | 0, as Spark's own" in section


def test_check_fails_on_a_stale_file_and_passes_on_a_fresh_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "metrics.md"
    target.write_text("# old\n")
    assert docs.main(["--check", "--output", str(target)]) == 1
    assert (
        "is stale: regenerate it with `python -m sparkwatch.metrics.docs`"
        in capsys.readouterr().err
    )
    assert docs.main(["--output", str(target)]) == 0
    assert docs.main(["--check", "--output", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == docs.render_metrics_markdown()


def test_check_reports_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert docs.main(["--check", "--output", str(tmp_path / "absent.md")]) == 1
    assert "is missing" in capsys.readouterr().err
