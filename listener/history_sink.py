"""Writes events to the SQL history from a background thread, in batches, with retries.

When the database is slow or down the batch being written is retried with exponential backoff and
jitter while new events wait in a bounded queue; past its capacity they are dropped and counted.
A failed attempt is logged when it is the first of an outage, every 20th, or when its message is
not the previous attempt's (the database went from refusing connections to missing its schema).
The writer starts each attempt after a failure afresh (new connections, the schema checked and,
when it may migrate, created again), so a database replaced meanwhile takes the batch held for
retry and everything queued behind it once it is back.
When the database refuses the data itself (a value it cannot store), the batch is written again
event by event and the events it still refuses are dropped, counted and logged: retrying them
would hold up every event after them for good.
Between writes the same thread runs periodic ``maintenance`` (the history's rollups, which the
History dashboard reads and which a deployment without a collector has no other writer of).
Nothing here ever runs on Spark's callback thread.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from sparkwatch.history.errors import is_data_error
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import EventKind, ParsedEvent
from sparkwatch.settings.listener import BY_NAME as LISTENER_BY_NAME
from sparkwatch.summary import one_line
from sparkwatch.worker import Backoff, BoundedQueue, Worker

log = logging.getLogger(__name__)
_URL = LISTENER_BY_NAME["history_url"]
_URL_SETTING = f"{_URL.env} or {_URL.conf_key}"
"""Named where the URL is refused: it is read as a setting at attach, and found wrong only here."""
ABORT_RESERVE_SECONDS = 1.0
"""Of a stop's timeout, kept for an aborted write to give up."""
STOP_ATTEMPTS = 2
"""Attempts a batch is given once the sink is stopping while its writes were already failing,
at once, without the backoff's wait (a second one for a pooled connection the database had
ended). Past them what is held is dropped and counted: retrying until the stop's deadline held
``spark.stop()`` (and the app's exit) ten seconds longer whenever the history was down,
unreachable or read-only, for events it would drop at the deadline anyway. A history that was
writing when the stop began is retried, with the backoff, until the deadline: a blip at stop
loses nothing it need not."""

_STOP = None


def _permanent_errors() -> tuple[type[BaseException], ...]:
    from sparkwatch.history.errors import HistoryUrlError

    return (HistoryUrlError,)


_PERMANENT = _permanent_errors()


class Writer(Protocol):
    def write(self, events: Sequence[ParsedEvent]) -> None: ...

    def end_abandoned(self, run_ids: Collection[str]) -> int: ...

    def close(self) -> None: ...


class HistorySink:
    QUEUE = "history"

    def __init__(
        self,
        writer: Writer,
        counters: ListenerCounters,
        capacity: int,
        batch_size: int,
        flush_seconds: float,
        backoff: tuple[float, float] = (0.5, 30.0),
        maintenance: Callable[[], object] | None = None,
        maintenance_seconds: float = 60.0,
    ) -> None:
        self._writer = writer
        self._maintenance = maintenance
        self._maintenance_seconds = maintenance_seconds
        self._maintenance_due = time.monotonic() + maintenance_seconds
        self._counters = counters
        self._batch_size = batch_size
        self._flush_seconds = flush_seconds
        self._backoff = Backoff(*backoff)
        self._last_failure: str | None = None
        """The message of the last failed attempt of the outage in progress (None: none)."""
        self._queue: BoundedQueue[ParsedEvent | None] = BoundedQueue(capacity)
        # Runs written as started or progressing and not yet as terminated: at a stop they are
        # ended as lost, as nothing will write their end (see sparkwatch.history.lost).
        self._open_runs: set[str] = set()
        self._abort = threading.Event()
        self._stopping = threading.Event()
        self._down_at_stop = False
        """Whether writes were failing when the stop began (set before ``_stopping``)."""
        self._failed_stopping = 0
        """Failed attempts since the stop began (see STOP_ATTEMPTS)."""
        self._in_flight = 0
        """Events taken from the queue and neither written nor dropped yet: the batch being
        gathered or written (changed by the worker only)."""
        self.worker = Worker("history", self._run, "sparkwatch-history")
        self.worker.start()

    def __call__(self, event: ParsedEvent) -> None:
        if self._abort.is_set() or not self._queue.offer(event):
            self._counters.count_dropped(self.QUEUE)

    def queue_state(self) -> tuple[int, int]:
        return self._queue.size(), self._queue.capacity

    def held(self) -> int:
        """Events queued or in the batch being written, the stop not counted: said at detach
        when the writer is still busy at its deadline (neither written nor dropped)."""
        return self._queue.waiting() + self._in_flight

    def flush(self, timeout: float) -> bool:
        return self._queue.wait_drained(timeout)

    def stop(self, timeout: float) -> None:
        """Write what is queued if the database lets us within ``timeout``, then stop."""
        end = time.monotonic() + timeout
        self._down_at_stop = self._backoff.failures > 0
        self._stopping.set()  # a write waiting out its backoff tries again now
        # Writing is aborted a little before the end, leaving time for the abort to land.
        abort_at = end - min(ABORT_RESERVE_SECONDS, timeout / 4)
        if self._queue.put_control(_STOP, max(0.0, abort_at - time.monotonic())):
            self.worker.join(max(0.0, abort_at - time.monotonic()))
        if self.worker.is_alive():
            self._abort.set()
            self.worker.join(max(0.0, end - time.monotonic()))
        if not self.worker.is_alive():  # else the daemon thread is still inside a write
            self._writer.close()

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            events = [e for e in batch if e is not None]
            try:
                if events:
                    self._write(events)
            finally:
                self._in_flight = 0  # each was written or dropped (and counted) by now
                self._queue.done(len(batch))
                self.worker.beat()
            if len(events) < len(batch) or self._abort.is_set():
                self._count_abandoned()
                self._end_open_runs()
                return
            if time.monotonic() >= self._maintenance_due:
                self._maintain()

    def _first(self) -> ParsedEvent | None:
        """Block for one event, running maintenance whenever it falls due while idle."""
        while self._maintenance is not None:
            try:
                wait = self._maintenance_due - time.monotonic()
                return self.worker.take(self._queue, timeout=max(wait, 0.0))
            except queue.Empty:
                self._maintain()
        return self.worker.take(self._queue)

    def _maintain(self) -> None:
        self._maintenance_due = time.monotonic() + self._maintenance_seconds
        if self._maintenance is None:
            return
        try:
            self._maintenance()
        except Exception as exc:  # noqa: BLE001 - the next interval retries; writes go on
            self._counters.count_error("history_maintenance")
            log.warning("sparkwatch: history maintenance failed (will retry): %s", one_line(exc))

    def _next_batch(self) -> list[ParsedEvent | None]:
        """Block for one event, then gather more for up to flush_seconds or batch_size."""
        batch = [self._first()]
        self._in_flight += batch[-1] is not None
        deadline = time.monotonic() + self._flush_seconds
        while len(batch) < self._batch_size and batch[-1] is not None:
            try:
                batch.append(self.worker.take(self._queue, deadline - time.monotonic()))
            except queue.Empty:
                break
            self._in_flight += batch[-1] is not None
        return batch

    def _end_open_runs(self) -> None:
        if self._abort.is_set() or not self._open_runs:
            return
        try:
            ended = self._writer.end_abandoned(self._open_runs)
        except Exception as exc:  # noqa: BLE001 - the history's silent-run rule ends them later
            log.warning("sparkwatch: could not end the runs still open at the stop: %s",
                        one_line(exc))
            return
        if ended:
            log.info("sparkwatch: %d runs still running at the stop ended as lost", ended)

    def _track_runs(self, events: list[ParsedEvent]) -> None:
        for parsed in events:
            if parsed.kind is EventKind.TERMINATED:
                self._open_runs.discard(parsed.event.run_id)
            else:
                self._open_runs.add(parsed.event.run_id)

    def _write(self, events: list[ParsedEvent]) -> None:
        while True:
            try:
                self._writer.write(events)
                self._track_runs(events)
                self._in_flight -= len(events)
                self._last_failure = None
                # Writing again: a later failure of the stop is a blip, retried to the deadline.
                self._down_at_stop, self._failed_stopping = False, 0
                if failures := self._backoff.succeeded():
                    log.info(
                        "sparkwatch: history writes resumed after %d failed attempts", failures
                    )
                return
            except _PERMANENT as exc:
                # A URL that can never work (typo, unsupported database, missing driver): say so
                # once and stop, instead of retrying forever.
                log.error("sparkwatch: history disabled (%s): %s", _URL_SETTING, exc)
                self._counters.count_delivery_failure(self.QUEUE)
                self._dropped(len(events))
                self._abort.set()
                return
            except Exception as exc:  # noqa: BLE001 - any DB error: retry, never crash the thread
                if is_data_error(exc):  # retrying would fail alike, and hold up what follows
                    self._isolate(events, exc)
                    return
                wait = self._backoff.failed()
                self._counters.count_delivery_failure(self.QUEUE)
                # One line: SQLAlchemy's message carries the whole statement and its rows.
                message = one_line(exc)
                changed, self._last_failure = message != self._last_failure, message
                if self._backoff.loud or changed:
                    log.warning("sparkwatch: history write failed (attempt %d): %s",
                                self._backoff.failures, message)
                if self._stopping.is_set() and self._down_at_stop:
                    self._failed_stopping += 1
                    if self._failed_stopping >= STOP_ATTEMPTS:  # down: nothing more is tried
                        self._abort.set()
                    wait = 0.0
            if self._stopping.is_set():
                self.worker.wait(wait, self._abort)
            else:  # woken by the stop (which sets _stopping before it ever sets _abort)
                self.worker.wait(wait, self._stopping)
            if self._abort.is_set():
                self._dropped(len(events))
                return

    def _isolate(self, events: list[ParsedEvent], exc: Exception) -> None:
        """The database refused ``events``' data: one event is dropped (counted and logged);
        several are written one by one, each through :meth:`_write`, so only those it refuses
        are dropped and one it cannot take now is retried as ever."""
        if len(events) > 1:
            for event in events:
                if self._abort.is_set():
                    self._dropped(1)
                else:
                    self._write([event])
            return
        self._counters.count_delivery_failure(self.QUEUE)
        self._dropped(1)
        log.error("sparkwatch: the history refused a %s event of query %s, dropped: %s",
                  events[0].kind.value, getattr(events[0].event, "query_id", "?"), one_line(exc))

    def _dropped(self, n: int) -> None:
        """Count ``n`` events in hand dropped: counted first, then no longer in hand (the stop
        line, read meanwhile, may count them twice, never miss them)."""
        self._counters.count_dropped(self.QUEUE, n)
        self._in_flight -= n

    def _count_abandoned(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:  # as each leaves the queue: held() misses at most this one
                self._counters.count_dropped(self.QUEUE)
            self._queue.done()
