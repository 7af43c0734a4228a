"""The history pump's ``written_until`` (every event acknowledged before it is in the history)
moves on write by write, on a real spool and the real history writer process, also while
ingest keeps the backlog larger than one write: the stall and lost-runs jobs and the tenants'
kept ids wait on it, and it stood still until ingest paused."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry

from sparkwatch.collector import pump as pump_module
from sparkwatch.collector.history_process import WriterProcess, Written
from sparkwatch.collector.ingest import spool_record
from sparkwatch.collector.pump import HistoryPump
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.model.tenant import DEFAULT_TENANT
from sparkwatch.spool import Position, Spool
from tests.support import wait_for
from tests.test_collector_support import run_events

BATCH = 2
"""Events per write: each write takes fewer records than ingest appends meanwhile."""


class ArrivingMeanwhile:
    """The real writer, with ingest appending three records while each write runs (a backlog
    that grows by one a write), for ``writes`` writes; ``written_until`` seen at each."""

    def __init__(self, writer: WriterProcess, spool: Spool, records: list[bytes],
                 writes: int) -> None:
        self._writer, self._spool, self._records = writer, spool, iter(records)
        self.url = writer.url
        self.writes_left = writes
        self.seen: list[float] = []
        self.pump: HistoryPump | None = None

    def write(self, start: Position, end: Position, max_events: int,
              stopping: Callable[[], bool]) -> Written | None:
        if self.writes_left > 0:
            self.writes_left -= 1
            for _ in range(3):
                self._spool.append_encoded(next(self._records))
        assert self.pump is not None
        self.seen.append(self.pump.written_until().timestamp())
        return self._writer.write(start, end, max_events, stopping)

    def close(self) -> None:
        self._writer.close()


def _records(count: int) -> list[bytes]:
    """One progress event a record, each of its own batch of one run."""
    started, progress = run_events(terminated=False)[:2]
    records = [spool_record(DEFAULT_TENANT, [orjson.dumps(started)])]
    for batch in range(count):
        event = {**progress, "payload": {**progress["payload"], "batchId": batch,
                                         "id": started["payload"]["id"],
                                         "runId": started["payload"]["runId"]}}
        records.append(spool_record(DEFAULT_TENANT, [orjson.dumps(event)]))
    return records


def _pump_under_backlog(tmp_path: Path, writes: int
                        ) -> tuple[Spool, ArrivingMeanwhile, HistoryPump]:
    """A pump (not started) on a real spool and writer, with a backlog of two writes to begin
    with and ingest outrunning each of ``writes`` writes: no pass ever reaches the end it began
    with."""
    spool = Spool(tmp_path / "spool", 64 << 20, fsync=False)
    writer = WriterProcess(f"sqlite:///{tmp_path / 'history.db'}", True, tmp_path / "spool")
    records = _records(3 * writes + 2 * BATCH)
    arriving = ArrivingMeanwhile(writer, spool, records[2 * BATCH:], writes=writes)
    for record in records[:2 * BATCH]:
        spool.append_encoded(record)
    pump = HistoryPump(spool, arriving, SelfMetrics(CollectorRegistry()), BATCH)
    arriving.pump = pump
    return spool, arriving, pump


def test_written_until_moves_on_while_the_backlog_stays_larger_than_a_write(
        tmp_path: Path) -> None:
    spool, arriving, pump = _pump_under_backlog(tmp_path, writes=40)
    before = pump.written_until().timestamp()
    pump.start()
    try:
        wait_for(lambda: arriving.writes_left == 0, 60, "40 writes under a growing backlog")
        # While ingest outran the writes (the spool never empty, no pass reaching its end),
        # the time moved on with the writes.
        assert not spool.is_empty()
        assert arriving.seen[-1] > arriving.seen[0] >= before, arriving.seen
        wait_for(spool.is_empty, 60, "the backlog drained once ingest paused")
        drained_at = time.time()
        wait_for(lambda: pump.written_until().timestamp() >= drained_at - 1, 10,
                 "written_until at the drain")
    finally:
        pump.stop(10)


def test_past_its_bound_on_ends_kept_written_until_still_moves_with_the_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backlog of more writes than ends are kept (4 here, 4,096 by default): dropping the
    oldest end left none a write could reach, and the time stood still again."""
    monkeypatch.setattr(pump_module, "MAX_ENDS", 4)
    _, arriving, pump = _pump_under_backlog(tmp_path, writes=60)
    pump.start()
    try:
        wait_for(lambda: arriving.writes_left == 0, 60, "60 writes under a growing backlog")
        assert arriving.seen[-1] > arriving.seen[-30], arriving.seen[-30:]
    finally:
        pump.stop(10)
