"""Retention on a SQLite history whose disk is nearly full (a real tmpfs, filled by a filler file
but for less room than one transaction deleting every due row would journal): it deletes in
bounded transactions, so it still frees the due rows, and the history takes writes again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from sparkwatch.collector.leases import Job, LeasedRunner
from sparkwatch.collector.retention import Retention
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.history import migrate
from sparkwatch.history.engine import create_engine
from tests.test_collector_jobs import NOW, progress_at, write
from tests.test_collector_support import fresh_ids, scalar
from tests.tmpfs import Filler, small_filesystem

OLD_RUNS, BATCHES_PER_RUN = 5, 200  # about 2 MB of rows, all due


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", "4m") as mounted:
        yield mounted


def batches(url: str) -> int:
    return int(scalar(url, "select count(*) from batches"))


def test_retention_frees_due_rows_on_a_nearly_full_disk_and_the_history_writes_again(
    disk: Path,
) -> None:
    url = f"sqlite:///{disk / 'history.db'}"
    migrate.upgrade(url)
    for _ in range(OLD_RUNS):
        write(url, progress_at([NOW - timedelta(days=10, seconds=s)
                                for s in range(BATCHES_PER_RUN)], **fresh_ids()))
    assert batches(url) == OLD_RUNS * BATCHES_PER_RUN
    filler = Filler(disk / "filler")
    filler.fill(leave=256 << 10)  # less than the ~2 MB one DELETE of them all would journal
    engine = create_engine(url)
    metrics = SelfMetrics(CollectorRegistry())
    try:
        runner = LeasedRunner(engine, "replica-a", metrics, clock=lambda: NOW)
        assert runner.run(Job("retention", 60, Retention(raw_days=7, rollup_days=90)))
        assert batches(url) == 0
        assert int(scalar(url, "select coalesce(sum(batches), 0) from query_runs")) == 0
        # The pages freed take new batches, on the same full disk.
        write(url, progress_at([NOW - timedelta(seconds=s) for s in range(BATCHES_PER_RUN)],
                               **fresh_ids()))
        assert batches(url) == BATCHES_PER_RUN
    finally:
        engine.dispose()
        filler.free()
