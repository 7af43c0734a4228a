"""PromQL building blocks over the metric catalogue: every metric name comes from a ``MetricDef``.

Rules and dashboards both use these, so a selector is spelled one way everywhere.
"""

from __future__ import annotations

from sparkwatch.metrics.catalogue import (
    APP_LABELS,
    OPERATOR_IDENTITY_LABELS,
    OPERATOR_LABELS,
    QUERY_LABELS,
    SOURCE_LABELS,
    STATE_OPERATOR_INFO,
    Kind,
    MetricDef,
)
from sparkwatch.metrics.custom import KNOWN

# Grouping label lists, as written inside by (...).
BY_APP = ", ".join(APP_LABELS)
BY_QUERY = ", ".join(QUERY_LABELS)
BY_OPERATOR = ", ".join(OPERATOR_LABELS)
BY_SOURCE = ", ".join(SOURCE_LABELS)
# One operator, whatever its name label says: the info metric's join key.
ON_OPERATOR = "app_id, query_id, operator_index"
IDENTITY = ", ".join(OPERATOR_IDENTITY_LABELS)

# Dashboard filters on the template variables ($tenant, $app, $query, $operator). A driver's own
# /metrics has no tenant label: "All" (.*) matches its empty value too.
TENANT_FILTER = 'tenant=~"$tenant"'
APP_FILTER = TENANT_FILTER + ', app_name=~"$app"'
QUERY_FILTER = APP_FILTER + ', query_name=~"$query"'
OPERATOR_FILTER = QUERY_FILTER + ', operator=~"$operator"'
# Legend of a per-operator series joined with its identity (``with_identity``).
OPERATOR_LEGEND = "{{query_name}} #{{operator_index}} {{kind}} [{{keys}}]"


def custom(spark_key: str) -> MetricDef:
    """The metric of a state store ``customMetrics`` key, e.g. ``rocksdbSstFileSize``."""
    return KNOWN[spark_key].metric


def name(metric: MetricDef | str, suffix: str = "") -> str:
    """The series name; ``suffix`` selects a histogram's ``_bucket``/``_sum``/``_count``."""
    if isinstance(metric, str):
        return metric
    if suffix and metric.kind is not Kind.HISTOGRAM:
        raise ValueError(f"{metric.name} is a {metric.kind}, it has no {suffix} series")
    return metric.name + suffix


def sel(metric: MetricDef | str, *matchers: str, suffix: str = "") -> str:
    """``name{m1, m2}``; empty matchers are skipped (the rules' selector may be empty)."""
    parts = [m for m in matchers if m]
    series = name(metric, suffix)
    return f"{series}{{{', '.join(parts)}}}" if parts else series


def rng(metric: MetricDef | str, window: str, *matchers: str, suffix: str = "") -> str:
    """A range selector ``name{...}[window]``."""
    return f"{sel(metric, *matchers, suffix=suffix)}[{window}]"


def rate(metric: MetricDef | str, window: str, *matchers: str, suffix: str = "") -> str:
    return f"rate({rng(metric, window, *matchers, suffix=suffix)})"


def increase(metric: MetricDef | str, window: str, *matchers: str) -> str:
    return f"increase({rng(metric, window, *matchers)})"


def by(aggregation: str, labels: str, expr: str) -> str:
    return f"{aggregation} by ({labels}) ({expr})"


def once(metric: MetricDef, expr: str) -> str:
    """``expr`` (over ``metric``'s series) with one series per labelled thing. A query scraped
    twice, through the collector (tenant="default") and from its driver (no tenant), has two
    series of equal value that differ in tenant, job and instance only: ``max`` keeps one."""
    return by("max", ", ".join(metric.labels), expr)


def total(labels: str, metric: MetricDef, expr: str) -> str:
    """``sum by (labels)`` of ``expr`` counting each thing once (see :func:`once`); a ``max``
    alone when ``labels`` already are all of the metric's."""
    if {label.strip() for label in labels.split(",")} == set(metric.labels):
        return by("max", labels, expr)
    return by("sum", labels, once(metric, expr))


def mean_per_event(histogram: MetricDef, window: str, *matchers: str, labels: str) -> str:
    """Mean observed value over ``window``: exact, as _sum and _count are cumulative. Without
    observations in the window (a terminated query) there is no value rather than NaN."""
    total = by("sum", labels, rate(histogram, window, *matchers, suffix="_sum"))
    count = by("sum", labels, rate(histogram, window, *matchers, suffix="_count"))
    return f"{total}\n/\n({count} > 0)"


def quantile(q: float, histogram: MetricDef, window: str, *matchers: str, labels: str) -> str:
    buckets = rate(histogram, window, *matchers, suffix="_bucket")
    return f"histogram_quantile({q}, {by('sum', 'le, ' + labels, buckets)})"


def with_identity(expr: str, *matchers: str) -> str:
    """``expr`` (per operator) with the operator's identity labels (kind, keys, watermark, ...)
    from the info metric, for legends. The listener exports the info metric with every operator's
    other metrics (source="progress" where the plan cannot be read), so no series is lost; ``topk``
    keeps one info series per operator when the same app is scraped twice."""
    info = f"topk by ({ON_OPERATOR}) (1, {sel(STATE_OPERATOR_INFO, *matchers)})"
    return f"({expr})\n* on ({ON_OPERATOR}) group_left ({IDENTITY})\n{info}"


def newly_increased(metric: MetricDef, window: str, selector: str, alive: MetricDef) -> str:
    """A counter that grew within ``window``, or that appeared with a value since then.

    Some counters are only exported from their first increment (a drop stage, a failing sink):
    ``increase()`` misses that first step. The second branch catches a series born within the
    window, but only for an app that was already scraped ``window`` ago (``alive offset``), so a
    Prometheus restart does not make every old non-zero counter look new.
    """
    now = sel(metric, selector)
    born = f"({now} > 0 unless {now} offset {window})"
    seen_before = f"{sel(alive, selector)} offset {window}"
    return f"{increase(metric, window, selector)} > 0\nor\n{born} and on (app_id) {seen_before}"


def silence_allowed(interval: str, like: str, limit: float, intervals: float) -> str:
    """Seconds of silence a query may keep: ``limit``, or ``intervals`` of its trigger interval
    when that is longer. A query reports once per trigger, so a ProcessingTime trigger longer
    than the limit is silent that long when healthy. ``like`` (a series of the query) gives the
    labels of the plain limit, for queries without an interval (available_now, once, Connect)."""
    return f"(clamp_min({intervals} * {interval}, {limit}) or {like} * 0 + {limit})"
