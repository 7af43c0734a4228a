"""A real collector whose spool is on a real full filesystem (a 2 MiB tmpfs, filled by a filler
file): ingest answers 503 with Retry-After, never 500, accepts nothing it could not spool, works
again as soon as there is room (no restart), and every event it acknowledged reaches the history
exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_for
from tests.test_collector_support import (
    Collector,
    count_rows,
    fresh_ids,
    run_events,
    samples,
)
from tests.tmpfs import Filler, small_filesystem


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", "2m") as mounted:
        yield mounted


def runs(n: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """``n`` recorded runs, each under fresh ids: (run id, its wire events)."""
    out = []
    for _ in range(n):
        ids = fresh_ids()
        out.append((ids["run_id"], run_events(**ids)))
    return out


def events_of(group: list[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    return [e for _, events in group for e in events]


def progress(events: list[dict[str, Any]]) -> int:
    return sum(1 for e in events if e["kind"] == "progress")


def metric(collector: Collector, name: str, **labels: str) -> float:
    found = [v for lbl, v in samples(collector.metrics(), name) if lbl == labels]
    return found[0] if found else 0.0


def test_a_full_spool_disk_answers_503_and_recovers_without_a_restart_or_a_loss(
    disk: Path, tmp_path: Path
) -> None:
    history = f"sqlite:///{tmp_path / 'history.db'}"
    collector = Collector(history, disk / "spool")
    collector.log = tmp_path / "collector.log"  # not on the full disk
    filler = Filler(disk / "filler")
    before, refused, after = runs(3), runs(20), runs(3)
    collector.start()
    try:
        assert collector.post(events_of(before)).status_code == 200

        # Room for a few KiB: the large request is torn mid-write, then refused.
        filler.fill(leave=8 << 10)
        for _ in range(3):
            response = collector.post(events_of(refused), gzipped=True)
            assert response.status_code == 503, response.text
            assert response.headers["Retry-After"].isdigit()
            assert "No space left on device" in response.json()["detail"]
        assert metric(collector, "sparkwatch_collector_spool_write_failures_total") >= 3
        assert metric(collector, "sparkwatch_collector_ingest_requests_total", code="500") == 0

        filler.free()  # no restart: the next push is accepted
        assert collector.post(events_of(after)).status_code == 200
        resent = collector.post(events_of(refused), gzipped=True)  # the client sends again
        assert resent.status_code == 200 and resent.json()["accepted"] == len(events_of(refused))

        expected = {run_id: progress(events) for run_id, events in before + refused + after}
        wait_for(lambda: all(batches(history, r) == n for r, n in expected.items()), 60,
                 "every acknowledged run in the history")
        wait_for(lambda: collector.get("/readyz").json()["spool"]["pending_bytes"] == 0, 30,
                 "the spool drained")
        assert {r: batches(history, r) for r in expected} == expected  # exactly once each
        assert "Traceback" not in collector.log_text()
    finally:
        collector.stop()


def batches(url: str, run_id: str) -> int:
    return count_rows(url, "select count(*) from batches where run_id = :r", r=run_id)
