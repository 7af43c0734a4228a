"""Moves accepted events from the spool to the SQL history, off the request path, in order.

One thread hands the oldest pending records to the history writer process (see
:mod:`.history_process`), which reads them from the spool and writes them with the shared,
idempotent :class:`~sparkwatch.history.writer.HistoryWriter` in one transaction; only once it
answers does the thread commit the spool cursor. When the database is down the
same records are retried with exponential backoff and jitter while ingest keeps spooling; a crash
between the write and the cursor commit replays them, which the idempotent writer absorbs.

The thread is a :class:`~sparkwatch.worker.Worker`: its heartbeat beats while it waits for
records or between attempts, not while the writer process works, so a writer that never answers
(stopped, wedged in the database) shows as a hung worker in /readyz and in
``sparkwatch_collector_worker_last_progress_timestamp_seconds``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from sparkwatch.collector.history_process import WriteFailed, Written
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.history.engine import describe_url
from sparkwatch.spool import Position, Spool
from sparkwatch.worker import DEFAULT_DEADLINE_SECONDS, Backoff, Worker

log = logging.getLogger(__name__)

MAX_ENDS = 4096
"""Ends kept while a backlog drains, one per write. Past it the last is replaced by each newer
one: the oldest are kept, for the writes to pass one by one (dropping them instead left no end
a write could reach under a backlog of more than this many writes, and the time stood still),
and ``written_until`` never runs ahead of what is written."""


class SpanWriter(Protocol):
    """Writes the spool's records from ``start`` (before ``end``), whole, up to ``max_events``,
    in one transaction; raises :class:`WriteFailed`; None when ``stopping()`` cut it short."""

    url: str

    def write(self, start: Position, end: Position, max_events: int,
              stopping: Callable[[], bool]) -> Written | None: ...

    def close(self) -> None: ...


class HistoryPump:
    def __init__(
        self,
        spool: Spool,
        writer: SpanWriter,
        metrics: SelfMetrics,
        batch_size: int,
        backoff: tuple[float, float] = (0.2, 15.0),
        deadline: float = DEFAULT_DEADLINE_SECONDS,
    ) -> None:
        self._spool = spool
        self._writer = writer
        self._metrics = metrics
        self._batch_size = batch_size
        self._backoff = backoff
        self._stop = threading.Event()
        self.healthy = True
        self.last_error: str | None = None
        self._written_until = time.time()
        self._ends: deque[tuple[Position, float]] = deque()
        """(the spool's end, a time before which every record was appended before that end),
        one per pass, oldest first: a write that passes an end moves ``written_until`` on to
        its time, also while the backlog stays larger than one write"""
        self.worker = Worker("history", self._run, "collector-history", deadline)
        # Here, where the spool and the metrics meet: the service tracks the spool's bytes only.
        metrics.track_spool_appends(lambda: spool.append_error)

    def start(self) -> None:
        self.worker.start()

    def stop(self, timeout: float) -> None:
        """Stop after the current attempt; what is pending stays in the spool for next time."""
        self._stop.set()
        self.worker.join(timeout)
        self._writer.close()

    def drained(self) -> bool:
        return self._spool.is_empty()

    def written_until(self) -> datetime:
        """Every event this replica acknowledged before this time is in the history: the jobs
        that judge silence by the history (stalls, lost runs) must not look past it, or a spool
        still draining after an outage makes every live query look stalled."""
        return datetime.fromtimestamp(self._written_until, UTC)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.time()
            if not self._spool.wait(0.5):
                self._ends.clear()
                self._written_until = began  # nothing was pending: all before it is written
                self.worker.beat()
                continue
            end = self._spool.end  # holds every record appended before ``began``
            if len(self._ends) < MAX_ENDS:
                self._ends.append((end, began))
            else:  # the oldest stay, to be passed first; the newest takes the last place
                self._ends[-1] = (end, began)
            written = self._write(self._spool.cursor, end)
            if written is not None:
                self._spool.commit(written.position)
                self._passed(written.position)
            self.worker.beat()

    def _passed(self, position: Position) -> None:
        """Written up to ``position``: ``written_until`` is the time of the last end it passed
        (a write takes ``batch_size`` events; under a backlog larger than that, the end a pass
        began with was never reached, and the time stood still until ingest paused: the stall
        and lost-runs jobs, and the tenants' ids of evicted queries, waited on it)."""
        while self._ends and self._ends[0][0] <= position:
            _, self._written_until = self._ends.popleft()

    def _write(self, start: Position, end: Position) -> Written | None:
        """Write until it succeeds, or None when the pump stops first."""
        backoff = Backoff(*self._backoff)
        while not self._stop.is_set():
            try:
                written = self._writer.write(start, end, self._batch_size, self._stop.is_set)
            except WriteFailed as exc:
                # The database, the URL's driver or the writer process failed: keep spooling,
                # say so, try again.
                wait = backoff.failed()
                self._failed(exc, backoff.failures)
            else:
                if written is None:
                    return None
                if failures := backoff.succeeded():
                    log.info("history writes resumed after %d failed attempts", failures)
                self.healthy, self.last_error = True, None
                self._metrics.history_up.set(1)
                self._metrics.written.inc(written.events)
                if written.quarantined:
                    self._metrics.quarantined.inc(written.quarantined)
                return written
            self.worker.wait(wait, self._stop)
        return None

    def _failed(self, exc: Exception, failures: int) -> None:
        self.healthy = False
        self.last_error = str(exc)
        self._metrics.history_up.set(0)
        self._metrics.write_failures.inc()
        if failures == 1 or failures % 20 == 0:
            # The quarantine file (beside the spool) may be what failed, not the history.
            what = ("quarantine write" if self.last_error.startswith("quarantine ")
                    else f"history write to {describe_url(self._writer.url)}")
            log.warning("%s failed (attempt %d, events stay spooled): %s", what, failures,
                        self.last_error)
