"""Alerts on event time and keeping up: watermark, late rows, backlog, batch duration."""

from __future__ import annotations

import json

from sparkwatch.dashboards.alerts import OPERATOR, QUERY, Alert, AlertFactory
from sparkwatch.dashboards.config import AlertConfig
from sparkwatch.dashboards.promql import increase, rate, sel
from sparkwatch.metrics import catalogue as cat
from sparkwatch.plan.trigger import REAL_TIME


def watermark_lag(c: AlertConfig, s: str) -> Alert:
    lag = sel(cat.QUERY_WATERMARK_LAG, s)
    limit = c.param("max_seconds")
    return Alert(
        "SparkStreamingWatermarkLagHigh",
        c,
        f"{lag} > {limit}",
        summary="Watermark of query {{ $labels.query_name }} trails processing time by more "
        f"than {limit}s.",
        description=f"The event-time watermark of {QUERY} is more than {limit} seconds behind "
        "the batches' processing time: results of windows wait that long, and state holds "
        "that much event time.",
        signals=(lag,),
        per=cat.QUERY_WATERMARK_LAG.labels,
    )


def watermark_not_advancing(c: AlertConfig, s: str) -> Alert:
    w = c.window
    changes = f"changes({sel(cat.QUERY_WATERMARK, s)}[{w}])"
    arrived = increase(cat.QUERY_INPUT_ROWS, w, s)
    return Alert(
        "SparkStreamingWatermarkNotAdvancing",
        c,
        f"{changes} == 0\nand\n{arrived} > 0",
        summary="Watermark of query {{ $labels.query_name }} is stuck while input arrives.",
        description=f"The watermark of {QUERY} has not moved for {w} although input rows "
        "arrived: windows never close, nothing is emitted in append mode and state is not "
        "evicted.",
        signals=(changes, arrived),
        per=cat.QUERY_WATERMARK.labels,
    )


def rows_dropped_by_watermark(c: AlertConfig, s: str) -> Alert:
    w, ratio = c.window, c.param("max_ratio")
    dropped = increase(cat.STATE_ROWS_DROPPED, w, s)
    arrived = increase(cat.QUERY_INPUT_ROWS, w, s)
    share = f"{dropped}\n/ ignoring (operator, operator_index) group_left\n{arrived}"
    return Alert(
        "SparkStreamingRowsDroppedByWatermark",
        c,
        f"{share}\n> {ratio}",
        summary="Query {{ $labels.query_name }} drops late rows at its watermark.",
        description=f"During the last {w}, {OPERATOR} dropped more than {percent(ratio)} of the "
        "query's input rows as later than the watermark: they are missing from the results.",
        signals=(dropped, arrived),
        per=cat.STATE_ROWS_DROPPED.labels,
    )


def processing_slower_than_input(c: AlertConfig, s: str) -> Alert:
    w, ratio = c.window, c.param("min_ratio")
    arrival = f"avg_over_time({sel(cat.QUERY_INPUT_RATE, s)}[{w}])"
    processing = f"avg_over_time({sel(cat.QUERY_PROCESSED_RATE, s)}[{w}])"
    return Alert(
        "SparkStreamingProcessingSlowerThanInput",
        c,
        f"{arrival}\n> {ratio} * {processing}",
        summary="Query {{ $labels.query_name }} processes rows slower than they arrive.",
        description=f"Averaged over {w}, input rows of {QUERY} arrived more than {ratio} times "
        "faster than Spark processed them: the query falls behind and latency grows.",
        signals=(arrival, processing),
        per=cat.QUERY_INPUT_RATE.labels,
    )


def source_backlog_growing(c: AlertConfig, s: str) -> Alert:
    w, floor = c.window, c.param("min_offsets")
    behind = sel(cat.SOURCE_MAX_BEHIND, s)
    trend = f"deriv({behind}[{w}])"
    return Alert(
        "SparkStreamingSourceBacklogGrowing",
        c,
        f"{trend} > 0\nand\n{behind} > {floor}",
        summary="Backlog of source {{ $labels.source_index }} of query {{ $labels.query_name }} "
        "keeps growing.",
        description=f"Source {{{{ $labels.source }}}} of {QUERY} is more than {floor} offsets "
        f"behind the latest (worst partition) and the gap grew over the last {w}.",
        signals=(trend, behind),
        per=cat.SOURCE_MAX_BEHIND.labels,
    )


def batch_duration(c: AlertConfig, s: str) -> Alert:
    # Spark's events carry no trigger interval: thresholds come from the config, per query
    # name. Real-time mode (Spark 4.1+) is the exception: its batches last their whole interval
    # by design, which the listener reads from the JVM (spark_streaming_query_trigger_info):
    # those are compared with their own interval, never with the configured limits.
    w, default, ratio = c.window, c.param("max_seconds"), c.param("real_time_max_ratio")
    per_query: dict[str, float] = dict(c.param("per_query"))
    real_time = sel(cat.QUERY_TRIGGER_INFO, s, f'trigger="{REAL_TIME}"')
    not_real_time = f"unless on(app_id, query_id) {real_time}"
    branches = [f"({_mean(w, s, f'query_name={_q(n)}')}) > {v} {not_real_time}"
                for n, v in per_query.items()]
    others = f"query_name!~{_alternatives(per_query)}" if per_query else ""
    branches.append(f"({_mean(w, s, others)}) > {default} {not_real_time}")
    interval = sel(cat.QUERY_TRIGGER_INTERVAL, s)
    branches.append(f"({_mean(w, s, '')}) > {ratio} * {interval}\n"
                    f"and on(app_id, query_id) {real_time}")
    return Alert(
        "SparkStreamingBatchDurationAboveTrigger",
        c,
        "\nor\n".join(branches),
        summary="Batches of query {{ $labels.query_name }} take longer than its trigger interval.",
        description=f"Over the last {w}, the mean batch duration of {QUERY} exceeded its "
        f"trigger interval (configured: {default}s unless set per query; in real-time mode, "
        f"{ratio} times the real-time batch duration, as each batch lasts that long by "
        "design): each trigger starts late and latency grows.",
        signals=(_mean(w, s, ""), interval),
        per=cat.QUERY_BATCH_DURATION.labels,
    )


def _mean(window: str, s: str, matcher: str) -> str:
    h = cat.QUERY_BATCH_DURATION
    total = rate(h, window, s, matcher, suffix="_sum")
    count = rate(h, window, s, matcher, suffix="_count")
    return f"{total} / {count}"


def percent(ratio: float) -> str:
    """``ratio`` as a percentage with up to 4 decimals, no trailing zeros: 0.001 is 0.1%, not
    the 0% a whole percentage would say."""
    return f"{ratio * 100:.4f}".rstrip("0").rstrip(".") + "%"


def _q(value: str) -> str:
    """A PromQL string literal: JSON's escapes are a subset of PromQL's (Go's)."""
    return json.dumps(value, ensure_ascii=False)


def _alternatives(names: dict[str, float]) -> str:
    """A PromQL string holding a regex that matches exactly the given query names."""
    # Query names are literal: regex metacharacters escaped, then quoted as a string.
    special = set(".^$*+?()[]{}|\\")
    return _q("|".join("".join("\\" + ch if ch in special else ch for ch in n) for n in names))


FACTORIES: dict[str, AlertFactory] = {
    "watermark_lag": watermark_lag,
    "watermark_not_advancing": watermark_not_advancing,
    "rows_dropped_by_watermark": rows_dropped_by_watermark,
    "processing_slower_than_input": processing_slower_than_input,
    "source_backlog_growing": source_backlog_growing,
    "batch_duration": batch_duration,
}
