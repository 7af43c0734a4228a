"""The listener's history sink on a SQLite history whose disk is full (a real tmpfs, filled by a
filler file): each failed write is logged on one line, not as the whole multi-line SQL statement
with its parameters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.history import migrate
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.listener.history_sink import HistorySink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.support import wait_for
from tests.test_collector_support import fresh_ids, run_events
from tests.tmpfs import Filler, small_filesystem


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", "2m") as mounted:
        yield mounted


def test_a_failed_history_write_on_a_full_disk_is_logged_on_one_line(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{disk / 'history.db'}"
    migrate.upgrade(url)
    counters = ListenerCounters()
    sink = HistorySink(HistoryWriter(url, migrate=False), counters, capacity=500, batch_size=50,
                       flush_seconds=0.05, backoff=(0.05, 0.2))
    filler = Filler(disk / "filler")
    filler.fill(leave=0)
    try:
        for _ in range(5):
            for event in run_events(**fresh_ids()):
                sink(parse_envelope(envelope_from_dict(event)))
        wait_for(lambda: any("history write failed" in r.getMessage() for r in caplog.records),
                 60, "a failed write logged")
    finally:
        filler.free()
        sink.stop(10)
    failed = [r.getMessage() for r in caplog.records if "history write failed" in r.getMessage()]
    assert all("\n" not in m and "INSERT" not in m for m in failed), failed[0]
    assert "database or disk is full" in failed[0]
