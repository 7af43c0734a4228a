"""The families /metrics renders, as OpenTelemetry metric points: nothing is defined twice.

The input is what the Prometheus side collects from :class:`~sparkwatch.metrics.state.MetricState`
(:class:`~sparkwatch.metrics.exposition.Families`, already cut to the metric profile); each family
is looked up in the catalogue for its kind and unit. Names stay the catalogue's (``_total``
included), so a backend that keeps names as sent shows the very series the dashboards and alert
rules read. Mapping:

- counter: a monotonic cumulative Sum;
- gauge: a Gauge; info (``*_info``): a Gauge of 1, its labels as attributes;
- histogram: a cumulative Histogram with the profile's explicit bounds;
- labels: attributes of the same names (``tenant`` too, on the collector);
- unit: UCUM from the name's base unit: ``s``, ``By``, ``1/s``, else ``1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    Sum,
)
from prometheus_client.core import Metric as Family

from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.catalogue import Kind, MetricDef
from sparkwatch.metrics.text import RowFamily
from sparkwatch.model.contract import INT64_MAX, INT64_MIN

CUMULATIVE = AggregationTemporality.CUMULATIVE
_UNITS = (("_per_second", "1/s"), ("_seconds", "s"), ("_bytes", "By"))


def unit_of(metric: MetricDef) -> str:
    """The UCUM unit of a catalogue metric, from the base unit its name ends in (the catalogue's
    naming rule: seconds and bytes, ``_total`` after the unit on counters)."""
    base = metric.name.removesuffix("_total")
    for suffix, unit in _UNITS:
        if base.endswith(suffix):
            return unit
    return "1"


def _by_family() -> dict[str, MetricDef]:
    # Read each time: the catalogue grows while modules load (custom keys), never afterwards.
    return {m.family: m for m in cat.ALL}


Rows = list[tuple[dict[str, str], float]]
Hists = list[tuple[dict[str, str], Sequence[tuple[str, float]], float]]


def _rows(family: Family) -> tuple[Rows, Hists]:
    """(attributes, value) rows and (attributes, buckets, sum) histograms of a family."""
    if isinstance(family, RowFamily):
        names = family.label_names
        rows = [(dict(zip(names, labels, strict=False)), value) for labels, value in family.rows]
        hists = [(dict(zip(names, labels, strict=False)), buckets, total)
                 for labels, buckets, total in family.histograms]
        return rows, hists
    # Any other prometheus_client family (the collector's stalled gauge): its samples.
    wanted = {family.name, family.name + "_total", family.name + "_info"}
    return [(dict(s.labels), s.value) for s in family.samples if s.name in wanted], []


def _number(value: Any) -> int | float:
    if isinstance(value, bool):
        return int(value)
    # An int stays an int (as_int), anything else a double: a series keeps one type. A sum of
    # counts can pass 64 bits (each count may reach 2**63 - 1): it saturates, as the history's
    # rollups do, where one such point failed the encoding of every app's export.
    if isinstance(value, int):
        return min(max(value, INT64_MIN), INT64_MAX)
    return float(value)


class Converter:
    """Families to OpenTelemetry metrics, remembering when each cumulative series started.

    A series' start is the previous collection's time when it first appears or when its value
    went down (a query evicted and seen again starts over): it accumulated after that point."""

    def __init__(self, start_ns: int) -> None:
        self._previous_ns = start_ns
        self._last: dict[tuple[Any, ...], tuple[int, float]] = {}

    def metrics(self, families: Iterable[Family], now_ns: int) -> list[Metric]:
        by_family = _by_family()
        seen: dict[tuple[Any, ...], tuple[int, float]] = {}
        out: list[Metric] = []
        for family in families:
            metric = by_family.get(family.name)
            if metric is None:
                continue
            rows, hists = _rows(family)
            converted = self._metric(metric, rows, hists, now_ns, seen)
            if converted is not None:
                out.append(converted)
        self._last, self._previous_ns = seen, now_ns
        return out

    def _start(self, key: tuple[Any, ...], value: float,
               seen: dict[tuple[Any, ...], tuple[int, float]]) -> int:
        last = self._last.get(key)
        start = last[0] if last is not None and value >= last[1] else self._previous_ns
        seen[key] = (start, value)
        return start

    def _metric(self, metric: MetricDef, rows: Rows, hists: Hists, now_ns: int,
                seen: dict[tuple[Any, ...], tuple[int, float]]) -> Metric | None:
        unit = unit_of(metric)
        if metric.kind is Kind.HISTOGRAM:
            if not hists:
                return None
            points = [self._histogram(metric, attrs, buckets, total, now_ns, seen)
                      for attrs, buckets, total in hists]
            return Metric(metric.name, metric.help, unit, Histogram(points, CUMULATIVE))
        if not rows:
            return None
        if metric.kind is Kind.COUNTER:
            sums = [NumberDataPoint(attrs, self._start((metric.name, *attrs.items()), value, seen),
                                    now_ns, _number(value)) for attrs, value in rows]
            return Metric(metric.name, metric.help, unit, Sum(sums, CUMULATIVE, True))
        info = metric.kind is Kind.INFO
        gauges = [NumberDataPoint(attrs, 0, now_ns, 1 if info else _number(value))
                  for attrs, value in rows]
        return Metric(metric.name, metric.help, unit, Gauge(gauges))

    def _histogram(self, metric: MetricDef, attrs: dict[str, str],
                   buckets: Sequence[tuple[str, float]], total: float, now_ns: int,
                   seen: dict[tuple[Any, ...], tuple[int, float]]) -> HistogramDataPoint:
        # Prometheus buckets are cumulative and end in +Inf; OTLP's are per bucket.
        cumulative = [int(n) for _, n in buckets]
        counts = [cumulative[0]] + [b - a for a, b in zip(cumulative, cumulative[1:], strict=False)]
        count = cumulative[-1]
        return HistogramDataPoint(
            attributes=attrs,
            start_time_unix_nano=self._start((metric.name, *attrs.items()), count, seen),
            time_unix_nano=now_ns,
            count=count,
            sum=total,
            bucket_counts=counts,
            explicit_bounds=[float(le) for le, _ in buckets[:-1]],
            min=None,  # type: ignore[arg-type]  # unknown: the state keeps buckets only
            max=None,  # type: ignore[arg-type]
        )
