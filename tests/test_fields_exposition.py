"""The field table changes no metric: the driver's exposition (prometheus_client) and the
collector's (sparkwatch.metrics.text), under the ``full`` and ``default`` profiles, of every
real progress fixture are byte for byte what they were before the catalogue took its state
families from the table (golden files captured from the code before that change). A deliberate
change to the exposition (a new metric, a new label) recaptures them:
``python -m tests.test_fields_exposition``, and the diff of the golden files shows it."""

from __future__ import annotations

import difflib
import gzip
import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.profiles import select
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.stats import ListenerStats
from sparkwatch.metrics.text import generate
from sparkwatch.model.events import AppInfo, Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from tests.conftest import FIXTURES

GOLDEN = FIXTURES / "exposition"
APP = AppInfo(name="golden", id="local-1", spark_version="4.3.0")
FIXTURE_FILES = sorted(FIXTURES.glob("spark-*/*.json"))
CASES = [(side, profile) for side in ("driver", "collector") for profile in ("full", "default")]


def folded(profile: str) -> tuple[MetricState, SparkwatchCollector]:
    """Every fixture's run (started, progress, idle) folded into one state."""
    state = MetricState(clock=lambda: 1_000_000.0, stale_seconds=None)
    for path in FIXTURE_FILES:
        data = json.loads(path.read_text())
        events = [(EventKind.STARTED, data["started"])]
        events += [(EventKind.PROGRESS, p) for p in data["progress"]]
        events.append((EventKind.IDLE, data["idle"]))
        for kind, payload in events:
            state.apply(parse_envelope(Envelope(kind, APP, 0.0, payload)))
    stats = ListenerStats(APP, "jvm", "0", received={"progress": 3}, queues={"intake": (0, 8)})
    return state, SparkwatchCollector(state, lambda: [stats], select(profile))


def exposition(side: str, profile: str) -> bytes:
    _, collector = folded(profile)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if side == "driver":
        return generate_latest(registry)
    return b"".join(generate(registry))


def golden_path(profile: str) -> Path:
    """One file per profile: both renderers produce the same bytes (text.generate's promise)."""
    return GOLDEN / f"{profile}.txt.gz"


@pytest.mark.parametrize(("side", "profile"), CASES)
def test_the_exposition_of_real_progress_is_byte_identical_to_the_golden_file(
        side: str, profile: str) -> None:
    got = exposition(side, profile)
    want = gzip.decompress(golden_path(profile).read_bytes())
    assert len(want.splitlines()) > 1000  # every fixture's queries and operators, not a stub
    if got != want:
        diff = difflib.unified_diff(want.decode().splitlines(), got.decode().splitlines(),
                                    "golden", side, lineterm="", n=0)
        pytest.fail("\n".join(list(diff)[:40]))


if __name__ == "__main__":  # python -m tests.test_fields_exposition: (re)capture the golden files
    GOLDEN.mkdir(exist_ok=True)
    for profile in ("full", "default"):
        golden_path(profile).write_bytes(gzip.compress(exposition("driver", profile), mtime=0))
