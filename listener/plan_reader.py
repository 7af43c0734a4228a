"""Reads each run's executed plan from the JVM, off every Spark thread, and maps its operators.

``onQueryStarted`` runs inside ``query.start()`` and there is no executed plan yet then: on that
event the reader only takes a handle on the running query, and reads the plan when the run's first
progress arrives (again when a progress lists other operators than the plan read). The handle
keeps the plan readable after a fast query (``availableNow``) has already ended. The intake worker
only enqueues; a thread of our own makes the Py4J calls. Where the plan cannot be read (Spark
Connect, a query gone, a layout a future Spark prints differently) every operator keeps what the
progress says, and the log says why once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from sparkwatch.listener.stage import QueuedStage
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import (
    AppInfo,
    ParsedEvent,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
)
from sparkwatch.plan.jvm import PlanUnavailable, find_query, read_raw_plan
from sparkwatch.plan.mapping import from_progress, map_plan
from sparkwatch.plan.model import QueryPlan, RawPlan, Source
from sparkwatch.worker import Backoff, BoundedQueue, Worker

log = logging.getLogger(__name__)

Deliver = Callable[[QueryPlan], None]
GRAB, READ, FORGET = "grab", "read", "forget"


@dataclass(frozen=True, slots=True)
class Job:
    action: str
    query_id: str
    run_id: str
    names: tuple[str, ...] = ()
    batch_id: int = -1

RETRIES = 5
RETRY_SECONDS = 0.5
MAX_REMEMBERED = 10_000


class PlanReader(QueuedStage[Job]):
    """An intake handler: enqueues new runs; its own thread reads, maps and delivers plans."""

    def __init__(
        self,
        jspark: Any | None,
        deliver: Sequence[tuple[str, Deliver]],
        unavailable: str | None = None,
        capacity: int = 256,
        retry_seconds: float = RETRY_SECONDS,
    ) -> None:
        """``jspark`` None (with ``unavailable`` saying why): every plan comes from progress."""
        self._jspark = jspark
        self._deliver = list(deliver)
        self._unavailable = unavailable or ("no JVM session" if jspark is None else None)
        self._retry = retry_seconds
        self._seen: dict[tuple[str, str], tuple[str, ...]] = {}
        self._handles: dict[tuple[str, str], Any] = {}
        """JVM queries taken when their run started (plan thread only)."""
        self._warned = False
        self._stop = threading.Event()
        self._hurry = threading.Event()
        """Set by :meth:`hurry` and by :meth:`stop`: no more waiting between attempts."""
        self.closers: list[Callable[[], None]] = []
        self.on_error: Callable[[], None] = lambda: None
        """Called for each plan read that failed (attach() counts them)."""
        self._queue: BoundedQueue[Job | None] = BoundedQueue(capacity)
        self.worker = Worker("plans", self._run, "sparkwatch-plans")
        self.worker.start()

    def __call__(self, parsed: ParsedEvent) -> None:
        event = parsed.event
        if isinstance(event, QueryStarted):
            self._offer(Job(GRAB, event.query_id, event.run_id))
        elif isinstance(event, QueryTerminated):
            self._seen.pop((event.query_id, event.run_id), None)
            self._offer(Job(FORGET, event.query_id, event.run_id))
        elif isinstance(event, QueryProgress):
            names = tuple(op.name for op in event.state_operators)
            key = (event.query_id, event.run_id)
            if self._seen.get(key) == names:
                return
            if len(self._seen) >= MAX_REMEMBERED:
                self._seen.clear()
            self._seen[key] = names
            if not self._offer(Job(READ, *key, names, event.batch_id)):
                self._seen.pop(key, None)  # try again with the next progress

    def _offer(self, job: Job) -> bool:
        if self._queue.offer(job):
            return True
        log.debug("sparkwatch: plan queue full, dropped %s of %s", job.action, job.query_id)
        return False

    def pause(self, seconds: float) -> None:
        """Wait on the plan thread (between a deliverer's attempts), beating; ends at
        :meth:`hurry` or stop."""
        self.worker.wait(seconds, self._hurry)

    def hurry(self) -> None:
        """From now on, no wait between attempts (detach(), before it flushes what is queued):
        a history that was down held ``spark.stop()`` for the plan writes' backoff, three seconds
        and more, on top of the event writer's."""
        self._hurry.set()

    def stopping(self) -> bool:
        """Whether stop() was called: a deliverer makes no further attempt then."""
        return self._stop.is_set()

    def stop(self, timeout: float) -> None:
        """Drop the jobs still queued, let the one in hand end without another attempt, and
        join the thread, all within ``timeout``. A stop that waited for every queued read and
        its retries kept connecting to a history that was down long after detach()."""
        self._stop.set()
        self._hurry.set()
        self._drop_queued()
        super().stop(timeout)

    def _drop_queued(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return
            self._queue.done()

    def _run(self) -> None:
        try:
            self._serve(self._do_logged)
        finally:
            # On this thread, which owns the deliverers' connections: closed as it ends, even
            # after a stop() that could not wait for the job in hand.
            for close in self.closers:
                close()

    def _do_logged(self, job: Job) -> None:
        if self._stop.is_set():  # offered after the stop drained the queue
            return
        try:
            self._do(job)
        except Exception:  # noqa: BLE001 - never let one plan stop the thread
            self.on_error()
            log.exception("sparkwatch: reading a query plan failed")

    def _do(self, job: Job) -> None:
        key = (job.query_id, job.run_id)
        if job.action == FORGET:
            self._handles.pop(key, None)
        elif job.action == GRAB and self._jspark is not None:
            if len(self._handles) >= MAX_REMEMBERED:
                self._handles.clear()
            try:
                self._handles[key] = find_query(self._jspark, *key)
            except Exception:  # noqa: BLE001 - the read falls back to looking it up again
                log.debug("sparkwatch: no handle on %s at start", job.query_id, exc_info=True)
        elif job.action == READ:
            self._publish(self._plan(job.query_id, job.run_id, job.names, job.batch_id))

    def _plan(self, query_id: str, run_id: str, names: tuple[str, ...], batch: int) -> QueryPlan:
        if self._jspark is None:
            return self._degraded(query_id, run_id, names, batch, self._unavailable or "")
        try:
            raw = self._read(query_id, run_id)
        except PlanUnavailable as exc:
            return self._degraded(query_id, run_id, names, batch, str(exc))
        plan = map_plan(raw, names)
        if plan.source is Source.PROGRESS:
            self._warn_once(query_id, plan.note or "")
        return plan

    def _read(self, query_id: str, run_id: str) -> RawPlan:
        """Retries while the query has no executed plan yet or Py4J hiccups."""
        for attempt in range(RETRIES):
            try:
                jquery = self._handles.get((query_id, run_id))
                if jquery is None:
                    jquery = find_query(self._jspark, query_id, run_id)
                return read_raw_plan(jquery, query_id, run_id)
            except PlanUnavailable as exc:
                if not exc.retry:
                    raise
                error: PlanUnavailable = exc
            except Exception as exc:  # noqa: BLE001 - Py4J errors, an internal API that moved
                first = (str(exc).strip().splitlines() or [""])[0]
                error = PlanUnavailable(f"{type(exc).__name__}: {first}"[:300])
            # On _stop, not _hurry: a hurry is for the history's writes; the JVM is not the
            # history that is down, and a short app's only plan is read during detach's flush.
            if attempt + 1 == RETRIES or self.worker.wait(self._retry, self._stop):
                raise error
        raise AssertionError("unreachable")  # pragma: no cover

    def _degraded(
        self, query_id: str, run_id: str, names: tuple[str, ...], batch: int, reason: str
    ) -> QueryPlan:
        self._warn_once(query_id, reason)
        return from_progress(query_id, run_id, names, f"plan not read: {reason}", batch)

    def _warn_once(self, query_id: str, reason: str) -> None:
        # One line for the whole session: a Connect app would otherwise say it for every run.
        level = logging.DEBUG if self._warned else logging.WARNING
        self._warned = True
        log.log(
            level,
            "sparkwatch: operator identity falls back to the progress's operator names for "
            "query %s (%s)%s",
            query_id,
            reason,
            "" if level == logging.DEBUG else "; further fallbacks are logged at debug level",
        )

    def _publish(self, plan: QueryPlan) -> None:
        for name, deliver in self._deliver:
            try:
                deliver(plan)
            except Exception:  # noqa: BLE001 - one failing sink must not starve the others
                self.on_error()
                log.exception("sparkwatch: %s failed to take the plan of %s", name, plan.query_id)



class PlanHistory:
    """Writes plans to the SQL history from the plan thread, with its own engine (plans are one
    write per run, so a few retries are enough; the event writer keeps its thread to itself)."""

    def __init__(self, url: str, migrate: bool, attempts: int = 3, backoff: float = 1.0) -> None:
        from sparkwatch.history.writer import HistoryWriter

        self._writer = HistoryWriter(url, migrate=migrate)
        self._attempts = attempts
        self._backoff = Backoff(backoff, backoff * 4)
        self._lost = Backoff(0.0, 0.0)
        """Counts the plans given up on in a row; its ``loud`` throttles the warning."""
        self._disabled = False
        self.wait: Callable[[float], object] = time.sleep
        """How to wait between attempts: the plan reader's worker waits with a heartbeat."""
        self.stopped: Callable[[], bool] = lambda: False
        """True once the reader stops: no attempt begins after (its engine is being closed)."""

    def __call__(self, plan: QueryPlan) -> None:
        from sparkwatch.history.errors import HistoryUrlError

        for attempt in range(self._attempts):
            if self._disabled or self.stopped():
                return
            try:
                self._writer.write_plans([plan])
                self._backoff.succeeded()
                if lost := self._lost.succeeded():
                    log.info("sparkwatch: plan writes resumed after %d plans not written", lost)
                return
            except HistoryUrlError:
                self._disabled = True  # attach's history sink already says why
                return
            except Exception as exc:  # noqa: BLE001 - a database hiccup: retry, then give up
                if attempt + 1 == self._attempts:
                    self._give_up(plan, exc)
                    return
                self.wait(self._backoff.failed())

    def _give_up(self, plan: QueryPlan, exc: Exception) -> None:
        # As the event writer does: the first plan lost in an outage and every 20th after it, not
        # one line per query run while the history is down.
        self._lost.failed()
        if self._lost.loud:
            log.warning("sparkwatch: plan of %s not written (%d in a row): %s",
                        plan.query_id, self._lost.failures, exc)

    def close(self) -> None:
        self._writer.close()


def make_plan_reader(
    spark: Any, app: AppInfo, state: MetricState, settings: Any,
    more: Sequence[tuple[str, Deliver]] = (),
) -> PlanReader:
    """The reader for ``attach()``: plans go to the exporter's state, the history and ``more``
    (the push sink, which sends them to the collector with the events)."""
    deliver: list[tuple[str, Deliver]] = [("metrics", partial(state.apply_plan, app)), *more]
    history = None
    if settings.history_url:
        history = PlanHistory(settings.history_url, settings.history_migrate)
        deliver.append(("history", history))
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        reader = PlanReader(None, deliver, unavailable="Spark Connect: the JVM is not reachable")
    else:
        reader = PlanReader(spark._jsparkSession, deliver)
    if history is not None:
        reader.closers.append(history.close)
        history.wait = reader.pause
        history.stopped = reader.stopping
    return reader
