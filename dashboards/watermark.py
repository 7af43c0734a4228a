"""Watermark, latency and backlog: event time, late rows, batch duration parts, source backlog."""

from __future__ import annotations

from typing import Any

from sparkwatch.dashboards import panels as p
from sparkwatch.dashboards import recording as r
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.promql import (
    BY_OPERATOR,
    BY_QUERY,
    BY_SOURCE,
    OPERATOR_FILTER,
    OPERATOR_LEGEND,
    QUERY_FILTER,
    by,
    rate,
    sel,
    total,
    with_identity,
)
from sparkwatch.dashboards.skeleton import prometheus_board
from sparkwatch.metrics import catalogue as cat

UID = "sparkwatch-watermark"
TITLE = "Watermark, latency and backlog"
DESCRIPTION = "Event time and watermark, late rows, batch duration parts, source backlog."
Q = "{{query_name}}"
SRC = "{{query_name}} source {{source_index}}"
RI = "$__rate_interval"
NOT_TOTAL = 'phase!="triggerExecution"'  # the total of the other phases


def _q(metric: cat.MetricDef | str, flt: str = QUERY_FILTER, extra: str = "") -> str:
    return by("max", BY_QUERY + extra, sel(metric, flt))


def _src(metric: cat.MetricDef) -> str:
    return by("max", BY_SOURCE, sel(metric, QUERY_FILTER))


def watermark_lag_graph(config: Config, description: str) -> Any:
    """Watermark lag per query with the alert's threshold as its red line: this board's and the
    overview's graph, so both follow the alert when its threshold changes."""
    return p.graph(
        "Watermark lag",
        description,
        [p.prom(_q(cat.QUERY_WATERMARK_LAG), Q)],
        "s",
        limit=config.alert("watermark_lag").param("max_seconds"),
    )


def event_time_panels(config: Config) -> list[Any]:
    delay = f"{_q(cat.QUERY_EVENT_TIME_MAX)}\n-\n{_q(cat.QUERY_WATERMARK)}"
    graphs = [
        watermark_lag_graph(
            config,
            "Processing time minus the watermark, per batch. It contains the withWatermark "
            "delay: flat at about that delay is healthy; a climbing line is a stuck watermark "
            "(no new event time, an idle source or partition) or event time falling behind.",
        ),
        p.graph(
            "Event-time lag of the newest row",
            "Processing time minus the newest event time of the last batch with data: how old "
            "data is when Spark sees it. Growth means upstream delay or a backlog.",
            [p.prom(_q(cat.QUERY_EVENT_TIME_LAG), Q)],
            "s",
        ),
        p.graph(
            "Event-time skew inside a batch",
            "Newest minus oldest event time within a batch: how out of order data arrives. "
            "The watermark delay should cover it, or late rows get dropped.",
            [p.prom(_q(cat.QUERY_EVENT_TIME_SKEW), Q)],
            "s",
        ),
        p.graph(
            "Watermark behind the newest event",
            "Newest event time minus the watermark: the effective delay (withWatermark delay, "
            "or more when several inputs' watermarks combine with the min policy).",
            [p.prom(delay, Q)],
            "s",
        ),
    ]
    return [g.span(6) for g in graphs]


def late_panels(config: Config) -> list[Any]:
    late = rate(cat.STATE_ROWS_DROPPED, RI, OPERATOR_FILTER)
    dropped = total(BY_QUERY, cat.STATE_ROWS_DROPPED, late)
    per_operator = total(BY_OPERATOR, cat.STATE_ROWS_DROPPED, late)
    arrived = total(BY_QUERY, cat.QUERY_INPUT_ROWS, rate(cat.QUERY_INPUT_ROWS, RI, QUERY_FILTER))
    return [
        p.graph(
            "Late rows dropped per second, per operator",
            "Rows each operator dropped for being older than the watermark. They are missing "
            "from the results; if that is not acceptable, raise the withWatermark delay (state "
            "grows accordingly).",
            [p.prom(with_identity(per_operator, OPERATOR_FILTER), OPERATOR_LEGEND)],
        ),
        p.graph(
            "Share of input dropped as late",
            "Late rows dropped over rows read. Red line: the share that raises the rows-dropped "
            "alert.",
            [p.prom(f"{dropped}\n/\n{arrived}", Q)],
            "percentunit",
            limit=config.alert("rows_dropped_by_watermark").param("max_ratio"),
        ),
    ]


def duration_panels(config: Config) -> list[Any]:
    trigger = config.alert("batch_duration").param("max_seconds")
    # Summed over queries, each query's buckets counted once (see promql.once).
    increases = f"increase({sel(cat.QUERY_BATCH_DURATION, QUERY_FILTER, suffix='_bucket')}[{RI}])"
    buckets = by("sum", "le", by("max", f"le, {BY_QUERY}", increases))
    last = _q(cat.QUERY_LAST_PHASE_DURATION, f"{QUERY_FILTER}, {NOT_TOTAL}", ", phase")
    return [
        p.graph(
            "Batch duration by phase (mean per batch)",
            "Where a batch's time goes (durationMs): addBatch runs the query itself; "
            "latestOffset/getBatch ask the sources; walCommit and commitOffsets write the "
            "checkpoint's logs; queryPlanning plans the batch. Stacked, the parts add up to "
            "the trigger execution.",
            [
                p.prom(
                    _q(r.PHASE_MEAN, f"{QUERY_FILTER}, {NOT_TOTAL}", ", phase"),
                    "{{query_name}} {{phase}}",
                )
            ],
            "s",
            stack=True,
        ),
        p.heat(
            "Batch duration distribution",
            "How many batches fell in each duration bucket over time. A second band appearing "
            "above the usual one is a class of slow batches (compactions, snapshot uploads, "
            "skewed keys).",
            p.prom(buckets, "{{le}}", fmt="heatmap"),
        ),
        p.graph(
            "Batch duration p50 and p95",
            "Percentiles of batch duration over 5 minutes. Red line: the trigger interval the "
            "batch-duration alert compares against (config batch_duration.max_seconds).",
            [p.prom(_q(r.BATCH_P50), f"{Q} p50"), p.prom(_q(r.BATCH_P95), f"{Q} p95")],
            "s",
            limit=trigger,
        ),
        p.graph(
            "Busy ratio",
            "Share of wall time spent running batches. Near 1 the batches run back to back: "
            "normal for the default trigger, but with a processing-time trigger it means the "
            "trigger interval is exceeded.",
            [p.prom(_q(r.BUSY_RATIO), Q)],
            "percentunit",
            limit=1,
        ),
        p.bars(
            "Last batch: time per phase",
            "The phases of the latest batch, to spot where a single slow batch spent its time.",
            [p.prom(last, "{{query_name}} {{phase}}", instant=True)],
            "s",
            width=24,
        ),
    ]


def backlog_panels() -> list[Any]:
    read = rate(cat.SOURCE_INPUT_ROWS, RI, QUERY_FILTER)
    return [
        p.graph(
            "Source arrival vs processing rate (last batch)",
            "Per source: rows per second arriving and rows per second Spark processed in the "
            "last batch. Processing below arrival for long builds a backlog.",
            [
                p.prom(_src(cat.SOURCE_INPUT_RATE), f"{SRC} arrival"),
                p.prom(_src(cat.SOURCE_PROCESSED_RATE), f"{SRC} processing"),
            ],
            width=8,
        ),
        p.graph(
            "Rows read per second, per source",
            "Rows read from each source, from the exact counter: the throughput actually achieved.",
            [p.prom(total(BY_SOURCE, cat.SOURCE_INPUT_ROWS, read), SRC)],
            width=8,
        ),
        p.graph(
            "Kafka offsets behind latest",
            "Backlog of Kafka sources: offsets between what the last batch read and the latest "
            "offsets (worst and average partition). A growing worst partition with a flat "
            "average is skew; both growing means the query cannot keep up.",
            [
                p.prom(_src(cat.SOURCE_MAX_BEHIND), f"{SRC} worst partition"),
                p.prom(_src(cat.SOURCE_AVG_BEHIND), f"{SRC} average partition"),
            ],
            width=8,
        ),
    ]


def build(config: Config) -> dict[str, Any]:
    return prometheus_board(UID, TITLE, DESCRIPTION, [
        ("Event time and watermark", event_time_panels(config)),
        ("Late rows", late_panels(config)),
        ("Batch duration", duration_panels(config)),
        ("Backlog", backlog_panels()),
    ])
