"""Reads each run's executed plan from the JVM, off every Spark thread, and maps its operators.

``onQueryStarted`` runs inside ``query.start()`` and there is no executed plan yet then, so the
plan is read once per run when that run's first progress arrives (re-read when a progress lists
other operators than the plan read). The intake worker only enqueues; a thread of our own makes the
Py4J calls. Where the plan cannot be read (Spark Connect, a query gone, a layout a future Spark
prints differently) every operator keeps what the progress says, and the log says why once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from sparkwatch.listener.queues import BoundedQueue
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo, ParsedEvent, QueryProgress, QueryTerminated
from sparkwatch.plan.mapping import from_progress, map_plan
from sparkwatch.plan.model import QueryPlan, RawPlan, Source
from sparkwatch.plan.settings import CHECKPOINT_KEYS, SESSION_KEYS

log = logging.getLogger(__name__)

Deliver = Callable[[QueryPlan], None]
Item = tuple[str, str, tuple[str, ...], int] | None
RETRIES = 5
RETRY_SECONDS = 0.5
MAX_REMEMBERED = 10_000


class PlanUnavailable(Exception):
    """The plan of this run cannot be read; the message says why."""

    def __init__(self, reason: str, retry: bool = False) -> None:
        super().__init__(reason)
        self.retry = retry


def read_raw_plan(jquery: Any, query_id: str, run_id: str) -> RawPlan:
    """Py4J: the executed plan of a JVM ``StreamingQuery`` (wrapper) and the settings around it."""
    execution = jquery.streamingQuery().lastExecution()
    if execution is None:
        raise PlanUnavailable("the query has not planned a batch yet", retry=True)
    return RawPlan(
        query_id=query_id,
        run_id=run_id,
        batch_id=int(execution.currentBatchId()),
        tree=str(execution.executedPlan().treeString()),
        output_mode=str(execution.outputMode()),
        state_checkpoint=str(execution.checkpointLocation()),
        conf={**_checkpoint_conf(execution), **_session_conf(execution)},
    )


def _checkpoint_conf(execution: Any) -> dict[str, str]:
    conf = execution.offsetSeqMetadata().conf()  # a Scala Map
    return {key: str(conf.apply(key)) for key in CHECKPOINT_KEYS if conf.contains(key)}


def _session_conf(execution: Any) -> dict[str, str]:
    runtime = execution.sparkSession().conf()
    out = {}
    for key in SESSION_KEYS:
        value = runtime.get(key, None)
        if value is not None:
            out[key] = str(value)
    return out


def find_query(jspark: Any, query_id: str, run_id: str) -> Any:
    """The active JVM query of this run; PlanUnavailable when it is gone or restarted."""
    jquery = jspark.streams().get(query_id)
    if jquery is None:
        raise PlanUnavailable("the query is no longer active")
    if str(jquery.runId()) != run_id:
        raise PlanUnavailable("the query restarted since")
    return jquery


class PlanReader:
    """An intake handler: enqueues new runs; its own thread reads, maps and delivers plans."""

    QUEUE = "plans"

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
        self._warned = False
        self._stop = threading.Event()
        self.closers: list[Callable[[], None]] = []
        self._queue: BoundedQueue[Item] = BoundedQueue(capacity)
        self._thread = threading.Thread(target=self._run, name="sparkwatch-plans", daemon=True)
        self._thread.start()

    def __call__(self, parsed: ParsedEvent) -> None:
        event = parsed.event
        if isinstance(event, QueryTerminated):
            self._seen.pop((event.query_id, event.run_id), None)
            return
        if not isinstance(event, QueryProgress):
            return
        names = tuple(op.name for op in event.state_operators)
        key = (event.query_id, event.run_id)
        if self._seen.get(key) == names:
            return
        if len(self._seen) >= MAX_REMEMBERED:
            self._seen.clear()
        self._seen[key] = names
        if not self._queue.offer((event.query_id, event.run_id, names, event.batch_id)):
            log.debug("sparkwatch: plan queue full, %s keeps progress names", event.query_id)

    def flush(self, timeout: float) -> bool:
        return self._queue.wait_drained(timeout)

    def stop(self, timeout: float) -> None:
        self._stop.set()
        if self._queue.put_control(None, timeout):
            self._thread.join(timeout)
        for close in self.closers:
            close()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._publish(self._plan(*item))
            except Exception:  # noqa: BLE001 - never let one plan stop the thread
                log.exception("sparkwatch: reading a query plan failed")
            finally:
                self._queue.done()

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
                return read_raw_plan(find_query(self._jspark, query_id, run_id), query_id, run_id)
            except PlanUnavailable as exc:
                if not exc.retry:
                    raise
                error: PlanUnavailable = exc
            except Exception as exc:  # noqa: BLE001 - Py4J errors, an internal API that moved
                first = (str(exc).strip().splitlines() or [""])[0]
                error = PlanUnavailable(f"{type(exc).__name__}: {first}"[:300])
            if attempt + 1 == RETRIES or self._stop.wait(self._retry):
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
                log.exception("sparkwatch: %s failed to take the plan of %s", name, plan.query_id)



class PlanHistory:
    """Writes plans to the SQL history from the plan thread, with its own engine (plans are one
    write per run, so a few retries are enough; the event writer keeps its thread to itself)."""

    def __init__(self, url: str, migrate: bool, attempts: int = 3, backoff: float = 1.0) -> None:
        from sparkwatch.history.writer import HistoryWriter

        self._writer = HistoryWriter(url, migrate=migrate)
        self._attempts = attempts
        self._backoff = backoff
        self._disabled = False

    def __call__(self, plan: QueryPlan) -> None:
        from sparkwatch.history.errors import HistoryUrlError

        for attempt in range(self._attempts):
            if self._disabled:
                return
            try:
                self._writer.write_plans([plan])
                return
            except HistoryUrlError:
                self._disabled = True  # attach's history sink already says why
                return
            except Exception as exc:  # noqa: BLE001 - a database hiccup: retry, then give up
                if attempt + 1 == self._attempts:
                    log.warning("sparkwatch: plan of %s not written: %s", plan.query_id, exc)
                    return
                time.sleep(self._backoff * (attempt + 1))

    def close(self) -> None:
        self._writer.close()


def make_plan_reader(spark: Any, app: AppInfo, state: MetricState, settings: Any) -> PlanReader:
    """The reader for ``attach()``: plans go to the exporter's state and the history."""
    deliver: list[tuple[str, Deliver]] = [("metrics", partial(state.apply_plan, app))]
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
    return reader
