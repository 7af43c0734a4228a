"""A prometheus_client custom collector over :class:`MetricState`, on an injected registry.

Everything is computed at scrape time from the folded state, never on the event path.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.catalogue import Kind, MetricDef
from sparkwatch.metrics.custom import KNOWN, split_instance_key
from sparkwatch.metrics.listener_bus import BusSample
from sparkwatch.metrics.profiles import FULL, Selection
from sparkwatch.metrics.state import MetricState, QueryState
from sparkwatch.metrics.stats import ListenerStats
from sparkwatch.metrics.text import RowFamily
from sparkwatch.model.events import QueryProgress, SourceProgress, StateOperator
from sparkwatch.plan.describe import label_values

MAX_SOURCE_LABEL = 120
"""Source descriptions are stable per query but can be long; cut to keep label values sane."""

_FAMILY_TYPES: dict[Kind, Callable[..., Metric]] = {
    Kind.GAUGE: GaugeMetricFamily,
    Kind.COUNTER: CounterMetricFamily,
    Kind.HISTOGRAM: HistogramMetricFamily,
    Kind.INFO: InfoMetricFamily,
}


class Families:
    """Lazily created metric families keyed by their definition, yielded in catalogue order.

    Families hold rows of label values (:class:`RowFamily`): /metrics renders them straight to
    text with :func:`sparkwatch.metrics.text.generate`. Families the metric profile does not
    export (``exported``; None: all) take no rows."""

    def __init__(self, exported: frozenset[str] | None = None,
                 scope_labels: tuple[str, ...] = ()) -> None:
        self._families: dict[str, RowFamily] = {}
        self._exported = exported
        self._wanted: dict[int, bool] = {}
        self._scope_labels = scope_labels
        """labels put before every family's own (the collector's ``tenant``)"""
        self._scope: tuple[str, ...] = ()
        self._scoped: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def set_scope(self, values: tuple[str, ...]) -> None:
        """The values of the scope labels for the rows added from now on."""
        self._scope = values
        self._scoped.clear()

    def wants(self, metric: MetricDef) -> bool:
        """``metric`` is exported: callers skip computing what nobody takes."""
        return self._exported is None or metric.name in self._exported

    def wants_any(self, group: tuple[MetricDef, ...]) -> bool:
        """Some family of ``group`` (a module-level tuple: cached by identity, as it is asked
        per query and operator) is exported."""
        hit = self._wanted.get(id(group))
        if hit is None:
            hit = self._wanted[id(group)] = any(self.wants(m) for m in group)
        return hit

    def add(self, metric: MetricDef, labels: Iterable[str], value: float | None) -> None:
        """One sample; a value not known yet (None) is no sample (absent, never a made-up 0)."""
        if value is None or self._exported is not None and metric.name not in self._exported:
            return
        self._family(metric).add(self._values(labels), value)

    def add_histogram(
        self, metric: MetricDef, labels: Iterable[str], buckets: list[tuple[str, int]], total: float
    ) -> None:
        if self._exported is not None and metric.name not in self._exported:
            return
        self._family(metric).add_histogram(self._values(labels), buckets, total)

    def _values(self, labels: Iterable[str]) -> tuple[str, ...]:
        values = _values(labels)
        if not self._scope_labels:
            return values
        # One scoped tuple per tuple passed (kept alive beside it, so its id stays its own): the
        # renderer's once-per-scrape label formatting still applies (see _values).
        hit = self._scoped.get(id(values))
        if hit is None:
            hit = self._scoped[id(values)] = (values, (*self._scope, *values))
        return hit[1]

    def __iter__(self) -> Iterator[Metric]:
        for metric in cat.ALL:
            family = self._families.get(metric.name)
            if family is not None:
                yield family

    def _family(self, metric: MetricDef) -> RowFamily:
        family = self._families.get(metric.name)
        if family is None:
            names = (*self._scope_labels, *metric.labels)
            empty = _FAMILY_TYPES[metric.kind](metric.family, metric.help, labels=names)
            family = self._families[metric.name] = RowFamily(empty, names)
        return family


def _values(labels: Iterable[str]) -> tuple[str, ...]:
    # Callers pass one tuple to many families (a query's labels): keeping that very tuple lets
    # the renderer format its label set once per scrape (text.Bodies).
    return labels if isinstance(labels, tuple) else tuple(labels)


class SparkwatchCollector(Collector):
    """Exposes the catalogue for every query in ``state`` plus the listeners' own counters, as
    far as ``selection`` (the metric profile) exports it."""

    def __init__(
        self,
        state: MetricState,
        listener_stats: Callable[[], Iterable[ListenerStats]] | None = None,
        selection: Selection = FULL,
    ) -> None:
        self._state = state
        self._listener_stats = listener_stats
        self._exported = selection.filter

    def describe(self) -> Iterable[Metric]:
        # Families depend on what queries exist; skip the registry's collect-at-register probe.
        return []

    def collect(self) -> Iterable[Metric]:
        out = Families(self._exported)
        add_state(out, self._state)
        if self._listener_stats is not None:
            for stats in self._listener_stats():
                add_listener(out, stats)
        return list(out)


def add_state(out: Families, state: MetricState) -> None:
    """Every app and query of ``state`` (stale ones evicted first)."""
    state.evict()
    with state.read() as (apps, queries):
        for app in apps:
            out.add(cat.APP_INFO, (app.name, app.id, app.spark_version), 1)
        for query in queries:
            add_query(out, query)


def add_listener(out: Families, s: ListenerStats) -> None:
    app = (s.app.name, s.app.id)
    out.add(cat.LISTENER_INFO, (*app, s.mode, s.version), 1)
    for kind, n in sorted(s.received.items()):
        out.add(cat.LISTENER_EVENTS_RECEIVED, (*app, kind), n)
    for stage in sorted(set(s.dropped) | set(s.queues)):
        out.add(cat.LISTENER_EVENTS_DROPPED, (*app, stage), s.dropped.get(stage, 0))
    for sink, n in sorted(s.delivered.items()):
        out.add(cat.LISTENER_EVENTS_DELIVERED, (*app, sink), n)
    for sink, n in sorted(s.delivery_failures.items()):
        out.add(cat.LISTENER_DELIVERY_FAILURES, (*app, sink), n)
    for where, n in sorted(s.errors.items()):
        out.add(cat.LISTENER_ERRORS, (*app, where), n)
    out.add(cat.LISTENER_PARSE_ERRORS, app, s.parse_errors)
    for queue, (size, capacity) in sorted(s.queues.items()):
        out.add(cat.LISTENER_QUEUE_SIZE, (*app, queue), size)
        out.add(cat.LISTENER_QUEUE_CAPACITY, (*app, queue), capacity)
    for worker, last in sorted(s.workers.items()):
        out.add(cat.LISTENER_WORKER_LAST_PROGRESS, (*app, worker), last)
    if s.bus is not None:
        add_listener_bus(out, app, s.bus)


def add_listener_bus(out: Families, app: tuple[str, str], bus: BusSample) -> None:
    out.add(cat.LISTENER_BUS_EVENTS_POSTED, app, bus.posted)
    for q in bus.queues:
        labels = (*app, q.name)
        out.add(cat.LISTENER_BUS_EVENTS_DROPPED, labels, q.dropped)
        out.add(cat.LISTENER_BUS_QUEUE_SIZE, labels, q.size)
        out.add(cat.LISTENER_BUS_QUEUE_CAPACITY, labels, q.capacity)
        out.add(cat.LISTENER_BUS_EVENTS_PROCESSED, labels, q.processed)
        out.add(cat.LISTENER_BUS_PROCESSING_MEAN, labels, q.mean_processing_seconds)


def query_labels(q: QueryState) -> tuple[str, str, str, str]:
    return (q.app.name, q.app.id, q.query_id, q.name)


def add_query(out: Families, q: QueryState) -> None:
    labels = query_labels(q)
    out.add(cat.QUERY_INFO, (*labels, q.run_id), 1)
    trigger = q.trigger()
    if trigger is not None:
        out.add(cat.QUERY_TRIGGER_INFO, (*labels, trigger[0]), 1)
        if trigger[1] is not None:
            out.add(cat.QUERY_TRIGGER_INTERVAL, labels, trigger[1] / 1000.0)
    out.add(cat.QUERY_ACTIVE, labels, 1 if q.active else 0)
    out.add(cat.QUERY_IDLE, labels, 1 if q.idle else 0)
    out.add(cat.QUERY_FAILED, labels, 1 if q.failed else 0)
    out.add(cat.QUERY_RUNS, labels, q.runs)
    out.add(cat.QUERY_FAILURES, labels, q.failures)
    out.add(cat.QUERY_START_TIME, labels, q.start_time)
    out.add(cat.QUERY_LAST_EVENT, labels, q.last_event_timestamp)
    out.add(cat.QUERY_BATCHES, labels, q.batches)
    out.add(cat.QUERY_INPUT_ROWS, labels, q.input_rows)
    if out.wants(cat.QUERY_BATCH_DURATION):
        out.add_histogram(
            cat.QUERY_BATCH_DURATION, labels, q.batch_duration.buckets(), q.batch_duration.total
        )
    if out.wants(cat.QUERY_PHASE_DURATION):
        for phase, hist in sorted(q.phase_duration.items()):
            out.add_histogram(
                cat.QUERY_PHASE_DURATION, (*labels, phase), hist.buckets(), hist.total
            )
    _add_event_time(out, q, labels)
    p = q.last_progress
    if p is None:
        return
    _add_progress(out, p, labels, idle=q.idle)
    for op in p.state_operators:
        add_operator(out, q, op, (*labels, op.name, str(op.index)))
    if out.wants_any(_SOURCE_FAMILIES):
        for src in p.sources:
            _add_source(out, q, src, labels, idle=q.idle)
    if p.sink is not None and out.wants_any(_SINK_FAMILIES):
        out.add(cat.SINK_INFO, (*labels, sink_label(p.sink.description)), 1)
        if p.sink.num_output_rows >= 0:
            out.add(cat.SINK_OUTPUT_ROWS, labels, q.sink_output_rows)
        for key, number in _numeric_items(p.sink.metrics):
            out.add(cat.SINK_METRIC, (*labels, key), number)


def _add_progress(out: Families, p: QueryProgress, labels: tuple[str, ...],
                  idle: bool = False) -> None:
    out.add(cat.QUERY_LAST_PROGRESS, labels, p.timestamp)
    out.add(cat.QUERY_BATCH_ID, labels, p.batch_id)
    out.add(cat.QUERY_LAST_INPUT_ROWS, labels, p.num_input_rows)
    # While idle no rows arrive: the rates fall to 0, as Spark's own gauges do; the last
    # batch's other figures stay what that batch reported.
    if p.input_rows_per_second is not None:
        out.add(cat.QUERY_INPUT_RATE, labels, 0.0 if idle else p.input_rows_per_second)
    if p.processed_rows_per_second is not None:
        out.add(cat.QUERY_PROCESSED_RATE, labels, 0.0 if idle else p.processed_rows_per_second)
    out.add(cat.QUERY_LAST_BATCH_DURATION, labels, p.batch_duration_ms / 1000.0)
    if out.wants(cat.QUERY_LAST_PHASE_DURATION):
        for phase, ms in sorted(p.duration_ms.items()):
            out.add(cat.QUERY_LAST_PHASE_DURATION, (*labels, phase), ms / 1000.0)
    watermark = p.event_time.watermark
    if watermark is not None:
        out.add(cat.QUERY_WATERMARK, labels, watermark)
        if watermark > 0:  # batch 0 reports the epoch: no watermark yet, no meaningful lag
            out.add(cat.QUERY_WATERMARK_LAG, labels, p.timestamp - watermark)
    if not out.wants(cat.QUERY_OBSERVED_METRIC):
        return
    for observation, columns in sorted(p.observed_metrics.items()):
        for column, value in sorted(columns.items()):
            number = _number(value)
            out.add(cat.QUERY_OBSERVED_METRIC, (*labels, observation, column), number)


def _add_event_time(out: Families, q: QueryState, labels: tuple[str, ...]) -> None:
    et = q.last_event_time
    if et is None or et.max is None:
        return
    out.add(cat.QUERY_EVENT_TIME_MAX, labels, et.max)
    if et.min is not None:
        out.add(cat.QUERY_EVENT_TIME_MIN, labels, et.min)
        out.add(cat.QUERY_EVENT_TIME_SKEW, labels, et.max - et.min)
    out.add(cat.QUERY_EVENT_TIME_AVG, labels, et.avg)
    if q.last_progress is not None:
        out.add(cat.QUERY_EVENT_TIME_LAG, labels, q.last_progress.timestamp - et.max)


def add_operator(out: Families, q: QueryState, op: StateOperator, labels: tuple[str, ...]) -> None:
    if out.wants(cat.STATE_OPERATOR_INFO):
        identity = label_values(q.identity(op), q.plan_source())
        out.add(cat.STATE_OPERATOR_INFO, (*labels, *identity), 1)
    for attr, per_base, metric in _SIZES:
        out.add(metric, labels, _in_base(getattr(op, attr), per_base))
    if out.wants_any(_OPERATOR_LAST_BATCH):
        for attr, per_base, metric in _LASTS:
            out.add(metric, labels, _in_base(getattr(op, attr), per_base))
    totals = q.operators.get((op.index, op.name))
    if totals is not None:
        if out.wants_any(_OPERATOR_TOTALS):
            amounts = totals.amounts
            for attr, per_base, metric in _TOTALS:
                out.add(metric, labels, _in_base(amounts[attr], per_base))
        if out.wants_any(_CUSTOM_TOTALS):
            for key, total in totals.custom.items():
                out.add(KNOWN[key].metric, labels, total)
    if out.wants_any(_CUSTOM_LEVELS):
        _add_custom_levels(out, op, labels)


def _in_base(value: int, per_base: float) -> float:
    """A field's value in its metric's base unit (ms / 1000.0: seconds); counts as they are."""
    return value if per_base == 1 else value / per_base


def _field_families(group: cat.StateFamilies) -> tuple[tuple[str, float, MetricDef], ...]:
    """(attribute, amount per base unit, family) of each of a catalogue group's fields."""
    return tuple((f.attr, float(f.per_base_unit), metric) for f, metric in group)


_SIZES = _field_families(cat.STATE_SIZES)
_TOTALS = _field_families(cat.STATE_TOTALS)
# The last batch's values: the counters' last-batch gauges and the operator's layout.
_LASTS = _field_families(cat.STATE_LASTS + cat.STATE_LAYOUT)
# Groups of families a profile takes or leaves together: one check skips the lot.
_OPERATOR_LAST_BATCH = tuple(metric for _, _, metric in _LASTS)
_OPERATOR_TOTALS = tuple(metric for _, _, metric in _TOTALS)
_CUSTOM_TOTALS = tuple(m.metric for m in KNOWN.values() if m.per_batch)
_CUSTOM_LEVELS = (
    *(m.metric for m in KNOWN.values() if not m.per_batch),
    cat.STATE_CUSTOM_METRIC,
    cat.STATE_INSTANCE_METRIC_MIN,
    cat.STATE_INSTANCE_METRIC_MAX,
    cat.STATE_INSTANCE_METRIC_REPORTED,
)
_SINK_FAMILIES = (cat.SINK_INFO, cat.SINK_OUTPUT_ROWS, cat.SINK_METRIC)
_SOURCE_FAMILIES = (
    cat.SOURCE_INPUT_ROWS,
    cat.SOURCE_INPUT_RATE,
    cat.SOURCE_PROCESSED_RATE,
    cat.SOURCE_MIN_BEHIND,
    cat.SOURCE_MAX_BEHIND,
    cat.SOURCE_AVG_BEHIND,
    cat.SOURCE_METRIC,
)


def _add_custom_levels(out: Families, op: StateOperator, labels: tuple[str, ...]) -> None:
    instances: dict[str, list[float]] = {}
    for key, value in op.custom_metrics.items():
        known = KNOWN.get(key)
        if known is not None:
            if not known.per_batch:
                out.add(known.metric, labels, value * known.scale)
            continue
        split = split_instance_key(key)
        if split is not None:
            instances.setdefault(split[0], []).append(float(value))
        else:
            out.add(cat.STATE_CUSTOM_METRIC, (*labels, key), value)
    for metric, values in sorted(instances.items()):
        out.add(cat.STATE_INSTANCE_METRIC_MIN, (*labels, metric), min(values))
        out.add(cat.STATE_INSTANCE_METRIC_MAX, (*labels, metric), max(values))
        out.add(cat.STATE_INSTANCE_METRIC_REPORTED, (*labels, metric), len(values))


_JVM_HASH = re.compile(r"@[0-9a-f]{6,8}\b")


def sink_label(description: str) -> str:
    """Spark 3.5 names some sinks ``NoopTable$@72d72c20``: drop the object hash so the label is
    stable across restarts."""
    return _JVM_HASH.sub("", description)[:MAX_SOURCE_LABEL]


def source_label(src: SourceProgress) -> str:
    return src.description[:MAX_SOURCE_LABEL]


def _add_source(
    out: Families, q: QueryState, src: SourceProgress, qlabels: tuple[str, ...],
    idle: bool = False,
) -> None:
    labels = (*qlabels, str(src.index), source_label(src))
    out.add(cat.SOURCE_INPUT_ROWS, labels, q.source_rows.get((src.index, src.description), 0))
    # Idle: no rows arrive at any source either (as the query's rates, see _add_progress).
    if src.input_rows_per_second is not None:
        out.add(cat.SOURCE_INPUT_RATE, labels, 0.0 if idle else src.input_rows_per_second)
    if src.processed_rows_per_second is not None:
        out.add(cat.SOURCE_PROCESSED_RATE, labels,
                0.0 if idle else src.processed_rows_per_second)
    backlog = {
        "minOffsetsBehindLatest": cat.SOURCE_MIN_BEHIND,
        "maxOffsetsBehindLatest": cat.SOURCE_MAX_BEHIND,
        "avgOffsetsBehindLatest": cat.SOURCE_AVG_BEHIND,
    }
    for key, number in _numeric_items(src.metrics):
        metric = backlog.get(key)
        if metric is not None:
            out.add(metric, labels, number)
        else:
            out.add(cat.SOURCE_METRIC, (*labels, key), number)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _numeric_items(metrics: dict[str, str] | Any) -> list[tuple[str, float]]:
    out = []
    for key, value in sorted(metrics.items()):
        number = _number(value)
        if number is not None:
            out.append((key, number))
    return out
