"""The latest state of every query, folded from events, that the exposition reads.

One :class:`MetricState` serves the embedded exporter (one app) and the collector (many apps).
Per-batch amounts are accumulated here into counters; a progress already applied for the same
(run id, batch id) is ignored, so retried deliveries never double-count.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sparkwatch.metrics.catalogue import BATCH_DURATION_BUCKETS, PHASE_DURATION_BUCKETS
from sparkwatch.metrics.custom import PER_BATCH_SCALE
from sparkwatch.model.events import (
    AppInfo,
    EventTime,
    ParsedEvent,
    QueryIdle,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
    StateOperator,
)
from sparkwatch.model.fields import OPERATOR_FIELDS
from sparkwatch.plan.kinds import kind_of
from sparkwatch.plan.model import OperatorIdentity, QueryPlan, Source

RUNS_REMEMBERED = 4
"""Runs per query whose applied batches are remembered to recognise late redeliveries."""
PER_BATCH_KEYS = frozenset(PER_BATCH_SCALE)
WAITING_PLANS_CAP = 10_000
"""Plans kept for queries not seen yet (see MetricState.expect_plan)."""


@dataclass(slots=True)
class Histogram:
    """Cumulative histogram over fixed upper bounds (seconds)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        # Counts are per bucket (the first bound >= value), made cumulative when read: one
        # increment per observation instead of one per bound (this runs ~10 times per event).
        i = bisect_left(self.bounds, value)
        if i < len(self.counts):
            self.counts[i] += 1

    def cumulative(self) -> list[int]:
        out, running = [], 0
        for c in self.counts:
            running += c
            out.append(running)
        return out

    def buckets(self) -> list[tuple[str, int]]:
        out = list(zip(_bound_labels(self.bounds), self.cumulative(), strict=True))
        out.append(("+Inf", self.count))
        return out


_BOUND_LABELS: dict[tuple[float, ...], tuple[str, ...]] = {}


def _bound_labels(bounds: tuple[float, ...]) -> tuple[str, ...]:
    """The ``le`` values of ``bounds``, formatted once per process (a scrape asks per query)."""
    labels = _BOUND_LABELS.get(tuple(bounds))
    if labels is None:
        labels = _BOUND_LABELS[tuple(bounds)] = tuple(repr(float(b)) for b in bounds)
    return labels


COUNTER_FIELDS: tuple[str, ...] = tuple(f.attr for f in OPERATOR_FIELDS if f.counter)
"""The field table's per-batch amounts (attributes), which the totals sum."""


@dataclass(slots=True)
class OperatorTotals:
    """Counters of one state operator (identified by plan position and name)."""

    amounts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTER_FIELDS, 0))
    """Each of :data:`COUNTER_FIELDS` summed over batches, in Spark's unit, by attribute."""
    custom: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class QueryState:
    app: AppInfo
    query_id: str
    name: str
    run_id: str = ""
    start_time: float | None = None
    active: bool = True
    idle: bool = False
    failed: bool = False
    exception: str | None = None
    error_class: str | None = None
    terminated_at: float | None = None
    last_seen: float = 0.0
    """Wall-clock time of the last event applied (for eviction of vanished queries)."""
    last_event_timestamp: float | None = None
    last_progress: QueryProgress | None = None
    last_event_time: EventTime | None = None
    """eventTime of the last batch that had data (min/max/avg are absent on empty batches)."""
    runs: int = 0
    failures: int = 0
    batches: int = 0
    input_rows: int = 0
    sink_output_rows: int = 0
    operators: dict[tuple[int, str], OperatorTotals] = field(default_factory=dict)
    source_rows: dict[tuple[int, str], int] = field(default_factory=dict)
    batch_duration: Histogram = field(default_factory=lambda: Histogram(BATCH_DURATION_BUCKETS))
    phase_duration: dict[str, Histogram] = field(default_factory=dict)
    phase_bounds: tuple[float, ...] = PHASE_DURATION_BUCKETS
    applied_batches: dict[str, int] = field(default_factory=dict)
    """Highest batch id applied per run id, for the last RUNS_REMEMBERED runs."""
    plan: QueryPlan | None = None
    """Operator identity of a run (from its executed plan), see :meth:`MetricState.apply_plan`."""

    def identity(self, op: StateOperator) -> OperatorIdentity:
        """``op`` as the current run's plan knows it, else as its progress name says."""
        plan = self.plan
        if plan is not None and plan.run_id == self.run_id:
            known = plan.operator(op.index)
            if known is not None and known.operator == op.name:
                return known
        return OperatorIdentity(index=op.index, operator=op.name, kind=kind_of(op.name))

    def trigger(self) -> tuple[str, int | None] | None:
        """(kind, interval ms) of the current run's trigger, None while unknown."""
        plan = self.plan
        if plan is not None and plan.run_id == self.run_id and plan.trigger is not None:
            return plan.trigger, plan.trigger_interval_ms
        return None

    def plan_source(self) -> Source:
        plan = self.plan
        if plan is not None and plan.run_id == self.run_id:
            return plan.source
        return Source.PROGRESS

    @property
    def key(self) -> tuple[str, str]:
        return (self.app.id, self.query_id)


class MetricState:
    """Thread-safe fold of events into per-query state; read under :meth:`read`."""

    def __init__(
        self,
        terminated_grace_seconds: float = 300.0,
        stale_seconds: float | None = None,
        clock: Callable[[], float] = time.time,
        batch_buckets: tuple[float, ...] = BATCH_DURATION_BUCKETS,
        phase_buckets: tuple[float, ...] = PHASE_DURATION_BUCKETS,
    ) -> None:
        self._lock = threading.Lock()
        self._queries: dict[tuple[str, str], QueryState] = {}
        self._apps: dict[str, AppInfo] = {}
        self._grace = terminated_grace_seconds
        self._stale = stale_seconds
        self._clock = clock
        # The metric profile's bounds (sparkwatch.metrics.profiles.Selection), fixed per process.
        self._batch_buckets = batch_buckets
        self._phase_buckets = phase_buckets
        # Plans of queries not seen yet (read back from the history by a restarted collector),
        # taken by the query's state when its first event arrives; oldest dropped beyond the cap.
        self._waiting_plans: dict[tuple[str, str], tuple[QueryPlan, float]] = {}

    def apply(self, parsed: ParsedEvent) -> bool:
        """Fold one event in; False when it was a duplicate progress and changed nothing."""
        with self._lock:
            self._apps[parsed.app.id] = parsed.app
            event = parsed.event
            state = self._query(parsed.app, event.query_id, getattr(event, "name", None))
            state.last_seen = self._clock()
            if isinstance(event, QueryProgress):
                return _apply_progress(state, event)
            if isinstance(event, QueryStarted):
                _apply_started(state, event)
            elif isinstance(event, QueryIdle):
                _apply_idle(state, event)
            elif isinstance(event, QueryTerminated):
                _apply_terminated(state, event, self._clock())
            return True

    def apply_all(self, events: Iterable[ParsedEvent]) -> int:
        return sum(1 for e in events if self.apply(e))

    def evict(self) -> int:
        """Forget terminated queries after the grace period, vanished ones after stale_seconds."""
        now = self._clock()
        with self._lock:
            doomed = [
                key
                for key, q in self._queries.items()
                if (q.terminated_at is not None and now - q.terminated_at >= self._grace)
                or (self._stale is not None and now - q.last_seen >= self._stale)
            ]
            for key in doomed:
                del self._queries[key]
            # A waiting plan whose query stays away as long as a vanished query would be kept.
            horizon = self._stale if self._stale is not None else self._grace
            for key, (_, since) in list(self._waiting_plans.items()):
                if now - since >= horizon:
                    del self._waiting_plans[key]
            live_apps = {app_id for app_id, _ in self._queries}
            for app_id in list(self._apps):
                if app_id not in live_apps:
                    del self._apps[app_id]
            return len(doomed)

    def read(self) -> _Reader:
        """Context manager holding the lock while the exposition walks the state."""
        return _Reader(self)

    def apply_plan(self, app: AppInfo, plan: QueryPlan) -> None:
        """Keep the operator identity of ``plan``'s run (read off the event path, see
        listener/plan_reader.py); a plan of an older run than the one seen is ignored, and so is
        an earlier read of the run's plan than the one kept."""
        with self._lock:
            state = self._queries.get((app.id, plan.query_id))
            if state is None or (state.run_id and state.run_id != plan.run_id):
                return
            kept = state.plan
            if kept is not None and kept.run_id == plan.run_id and kept.read_at > plan.read_at:
                return
            state.plan = plan

    def expect_plan(self, app: AppInfo, plan: QueryPlan) -> None:
        """Keep ``plan`` for its query's first event (a restarted collector reads the plans of the
        runs still running back from the history: their listeners pushed them once); applied now
        if the query is already here. At most WAITING_PLANS_CAP wait, the oldest dropped."""
        with self._lock:
            if (app.id, plan.query_id) not in self._queries:
                self._waiting_plans[(app.id, plan.query_id)] = (plan, self._clock())
                while len(self._waiting_plans) > WAITING_PLANS_CAP:
                    del self._waiting_plans[next(iter(self._waiting_plans))]
                return
        self.apply_plan(app, plan)

    def query(self, app_id: str, query_id: str) -> QueryState | None:
        with self._lock:
            return self._queries.get((app_id, query_id))

    def _query(self, app: AppInfo, query_id: str, name: str | None) -> QueryState:
        state = self._queries.get((app.id, query_id))
        if state is None:
            state = QueryState(
                app=app,
                query_id=query_id,
                name=name or "",
                batch_duration=Histogram(self._batch_buckets),
                phase_bounds=self._phase_buckets,
                plan=self._waiting_plans.pop((app.id, query_id), (None, 0.0))[0],
            )
            self._queries[(app.id, query_id)] = state
        elif name:
            state.name = name
        return state


class _Reader:
    def __init__(self, owner: MetricState) -> None:
        self._owner = owner

    def __enter__(self) -> tuple[list[AppInfo], list[QueryState]]:
        self._owner._lock.acquire()
        return list(self._owner._apps.values()), list(self._owner._queries.values())

    def __exit__(self, *exc: object) -> None:
        self._owner._lock.release()


def _start_run(state: QueryState, run_id: str, start_time: float | None) -> None:
    state.run_id = run_id
    state.runs += 1
    state.start_time = start_time
    state.active, state.idle, state.failed = True, False, False
    state.exception = state.error_class = None
    state.terminated_at = None


def _remember_batch(state: QueryState, run_id: str, batch_id: int) -> None:
    state.applied_batches.pop(run_id, None)  # re-insert: the dict stays ordered oldest run first
    state.applied_batches[run_id] = batch_id
    while len(state.applied_batches) > RUNS_REMEMBERED:
        del state.applied_batches[next(iter(state.applied_batches))]


def _apply_started(state: QueryState, event: QueryStarted) -> None:
    if event.run_id != state.run_id:
        _start_run(state, event.run_id, event.timestamp)
    else:
        state.start_time = event.timestamp


def _apply_idle(state: QueryState, event: QueryIdle) -> None:
    if event.run_id != state.run_id:
        # Listener attached after the query started: the first event we see opens the run.
        _start_run(state, event.run_id, None)
    state.idle = True
    state.last_event_timestamp = event.timestamp


def _apply_terminated(state: QueryState, event: QueryTerminated, now: float) -> None:
    if event.run_id == state.run_id and state.terminated_at is not None:
        return  # a redelivered termination: counting it again would double the failures
    if event.run_id != state.run_id:
        _start_run(state, event.run_id, None)
    state.active, state.idle = False, False
    state.failed = event.exception is not None
    state.exception, state.error_class = event.exception, event.error_class
    if state.failed:
        state.failures += 1
    state.terminated_at = now


def _apply_progress(state: QueryState, p: QueryProgress) -> bool:
    # Checked before the run switch: a retried delivery of the previous run's batch can arrive
    # after the new run started, and must neither be counted again nor reopen the old run.
    last = state.applied_batches.get(p.run_id)
    if last is not None and p.batch_id <= last:
        return False
    if p.run_id != state.run_id:
        _start_run(state, p.run_id, None)
    _remember_batch(state, p.run_id, p.batch_id)
    state.last_progress = p
    state.idle = False
    state.last_event_timestamp = p.timestamp
    if p.event_time.max is not None:
        state.last_event_time = p.event_time
    state.batches += 1
    state.input_rows += max(p.num_input_rows, 0)
    if p.sink is not None and p.sink.num_output_rows >= 0:
        state.sink_output_rows += p.sink.num_output_rows
    state.batch_duration.observe(p.batch_duration_ms / 1000.0)
    for phase, ms in p.duration_ms.items():
        hist = state.phase_duration.get(phase)
        if hist is None:
            hist = state.phase_duration[phase] = Histogram(state.phase_bounds)
        hist.observe(ms / 1000.0)
    for src in p.sources:
        source = (src.index, src.description)
        state.source_rows[source] = state.source_rows.get(source, 0) + max(src.num_input_rows, 0)
    for op in p.state_operators:
        totals = state.operators.get((op.index, op.name))
        if totals is None:
            totals = state.operators[(op.index, op.name)] = OperatorTotals()
        # A counter only grows: a negative amount (refused by the contract at the door, so only
        # from a caller that bypassed it) adds nothing.
        amounts = totals.amounts
        for attr in COUNTER_FIELDS:
            amounts[attr] += max(getattr(op, attr), 0)
        accumulated, custom = totals.custom, op.custom_metrics
        # Only the per-batch keys (a handful of ~40 on RocksDB), found by a set intersection in C.
        for key in PER_BATCH_KEYS.intersection(custom):
            amount = custom[key] * PER_BATCH_SCALE[key]
            # NaN and negatives add nothing (the series still exists, at what it had).
            accumulated[key] = accumulated.get(key, 0.0) + (amount if amount > 0 else 0.0)
    return True
