"""Overview: every query with its status and vital signs, problems first; the listener's health."""

from __future__ import annotations

from typing import Any

from sparkwatch.dashboards import panels as p
from sparkwatch.dashboards import recording as r
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.promql import (
    APP_FILTER,
    BY_QUERY,
    OPERATOR_FILTER,
    QUERY_FILTER,
    by,
    rate,
    sel,
    total,
)
from sparkwatch.dashboards.skeleton import prometheus_board
from sparkwatch.dashboards.tables import column_units, join_columns, status_column
from sparkwatch.dashboards.watermark import watermark_lag_graph
from sparkwatch.metrics import catalogue as cat

UID = "sparkwatch-overview"
TITLE = "Overview"
DESCRIPTION = "Every Structured Streaming query sparkwatch sees, problems first."
LEGEND = "{{query_name}}"
# Labels a scrape adds to every series: they tell the collector's copy of a query from its
# driver's (ServiceMonitor and PodMonitor targets of the chart, or static ones).
SCRAPE_LABELS = "tenant, job, instance, namespace, pod, container, service, endpoint"


def _q(metric: cat.MetricDef | str) -> str:
    return by("max", BY_QUERY, sel(metric, QUERY_FILTER))


def _per_query(metric: cat.MetricDef) -> str:
    """An operator metric summed over the query's operators, each counted once."""
    return total(BY_QUERY, metric, sel(metric, OPERATOR_FILTER))


def _input_rate(window: str) -> str:
    return total(BY_QUERY, cat.QUERY_INPUT_ROWS, rate(cat.QUERY_INPUT_ROWS, window, QUERY_FILTER))


def queries_table() -> Any:
    columns = {
        "Status": _q(r.STATUS),
        "Input rows/s": _input_rate("5m"),
        "Processed rows/s": _q(cat.QUERY_PROCESSED_RATE),
        "Batch duration": _q(r.BATCH_MEAN),
        "State rows": _per_query(cat.STATE_ROWS),
        "State memory": _per_query(cat.STATE_MEMORY),
        "Watermark lag": _q(cat.QUERY_WATERMARK_LAG),
        "Last event age": _q(r.LAST_EVENT_AGE),
        "Last progress age": f"time() - {_q(cat.QUERY_LAST_PROGRESS)}",
    }
    targets = [p.prom(expr, instant=True, fmt="table") for expr in columns.values()]
    panel = p.grid(
        "Queries, problems first",
        "One row per query. Status: failed (terminated with an exception), stalled (active but "
        "silent), alerting (a sparkwatch alert fires for it), then running, idle, terminated. "
        "Rates and batch duration are 5-minute averages; state sums all operators; last event "
        "age is the time since the last progress or idle event (liveness), last progress age "
        "since the last batch (it grows for an idle query, which is fine). Start with the top "
        "rows: the runbook of a firing alert says what to check; the other dashboards break "
        "each column down per operator and per phase.",
        targets,
        height=9,
    )
    panel = join_columns(panel, list(columns), hidden=("Time", "app_id"))
    units = {
        "Input rows/s": "short",
        "Processed rows/s": "short",
        "Batch duration": "s",
        "State rows": "short",
        "State memory": "bytes",
        "Watermark lag": "s",
        "Last event age": "s",
        "Last progress age": "s",
    }
    return status_column(column_units(panel, units), "Status")


def counters() -> list[Any]:
    status = sel(r.STATUS, QUERY_FILTER)
    active = _q(cat.QUERY_ACTIVE)
    # An app's alert fires once per source that scrapes it (collector and driver): counted once,
    # without the labels the scrape adds. Alerts of no app (the collector's) count per instance.
    firing = f'ALERTS{{alertstate="firing", {APP_FILTER}'
    alerts = (
        f'count without ({SCRAPE_LABELS}) ({firing}, app_id!=""}})\nor\n{firing}, app_id=""}}'
    )
    return [
        p.single(
            "Active queries",
            "Queries running now (idle ones included). A drop you did not plan is a query that "
            "terminated: see the table below and the History dashboard for its exception.",
            f"count({active} == 1) or vector(0)",
        ),
        p.single(
            "Failed queries",
            "Queries whose last run ended with an exception (kept for the listener's terminated "
            "grace period). Anything above 0 needs the exception: History dashboard, runs table.",
            f"count({status} == {r.FAILED}) or vector(0)",
            limit=1,
        ),
        p.single(
            "Stalled queries",
            "Active queries that sent neither progress nor idle events for longer than the "
            "configured silence (or a few of their trigger intervals, when longer): a hung batch "
            "or a stuck driver. See the stalled runbook.",
            f"count({status} == {r.STALLED}) or vector(0)",
            limit=1,
        ),
        p.single(
            "Firing alerts",
            "sparkwatch and other alerts firing for the selected apps (Prometheus' ALERTS). Each "
            "alert links its runbook.",
            f"count({alerts}) or vector(0)",
            limit=1,
        ),
    ]


def throughput(config: Config) -> list[Any]:
    stall = config.alert("query_stalled").param("max_silence_seconds")
    graphs = [
        p.graph(
            "Input vs processed rows per second",
            "Rows read per second (from the input counter, exact whatever the scrape interval) "
            "against the processing rate Spark reports for the last batch. Processing that stays "
            "below input means the query falls behind: see the Watermark, latency and backlog "
            "dashboard.",
            [
                p.prom(_input_rate("$__rate_interval"), f"{LEGEND} input"),
                p.prom(_q(cat.QUERY_PROCESSED_RATE), f"{LEGEND} processed (last batch)"),
            ],
        ),
        p.graph(
            "Batch duration (p95 and mean, 5m)",
            "How long micro-batches take. A rising line means more data per batch or slower "
            "state access; compare with the trigger interval (the batch duration alert's "
            "threshold) and break it down per phase on the latency dashboard.",
            [p.prom(_q(r.BATCH_P95), f"{LEGEND} p95"), p.prom(_q(r.BATCH_MEAN), f"{LEGEND} mean")],
            "s",
            limit=config.alert("batch_duration").param("max_seconds"),
        ),
        p.graph(
            "Last event age",
            "Seconds since each query's last progress or idle event. It saws up to the trigger "
            "interval (or 10 s idle interval) and drops; a line that keeps climbing past the red "
            "threshold is a stalled query, unless its trigger interval is longer (the stalled "
            "alert allows such a query a few of its intervals).",
            [p.prom(_q(r.LAST_EVENT_AGE), LEGEND)],
            "s",
            limit=stall,
        ),
    ]
    return [g.span(8) for g in graphs]


def state_and_watermark(config: Config) -> list[Any]:
    graphs = [
        p.graph(
            "State rows per query",
            "Rows held in state, summed over the query's stateful operators. It should level off "
            "once the watermark evicts old windows; steady growth is the unbounded-state pattern. "
            "The State store dashboard shows each operator.",
            [p.prom(_per_query(cat.STATE_ROWS), LEGEND)],
        ),
        p.graph(
            "State memory per query",
            "Memory of the state stores, summed over operators and partitions. With RocksDB "
            "bounded memory the figure can be unreliable (SPARK-48208); compare with executor "
            "memory and the projection on the State store dashboard.",
            [p.prom(_per_query(cat.STATE_MEMORY), LEGEND)],
            "bytes",
        ),
        watermark_lag_graph(
            config,
            "How far the event-time watermark trails processing time. It includes the "
            "withWatermark delay, so a flat line at that delay is healthy; growth means the "
            "watermark is stuck or event time falls behind. Red line: the alert threshold.",
        ),
    ]
    return [g.span(8) for g in graphs]


def _increase(labels: str, counter: cat.MetricDef, flt: str) -> str:
    return total(labels, counter, f"increase({sel(counter, flt)}[$__rate_interval])")


def listener() -> list[Any]:
    app = APP_FILTER
    return [
        p.graph(
            "Listener events received per second",
            "Query events the sparkwatch listener took from Spark, by kind. Progress events "
            "follow the batches; idle events come every 10 s from queries without new data.",
            [
                p.prom(
                    total(
                        "app_name, event",
                        cat.LISTENER_EVENTS_RECEIVED,
                        rate(cat.LISTENER_EVENTS_RECEIVED, "$__rate_interval", app),
                    ),
                    "{{event}}",
                )
            ],
            width=8,
        ),
        p.graph(
            "Listener events dropped",
            "Events lost per stage (receive, intake, history, push). Anything above zero means "
            "gaps in metrics or history: see the listener-dropping-events runbook.",
            [
                p.prom(
                    _increase("app_name, stage", cat.LISTENER_EVENTS_DROPPED, app),
                    "{{stage}}",
                )
            ],
            width=8,
        ),
        p.graph(
            "Listener queue fill",
            "Share of each bounded queue in use. Near 1 the next events are dropped: the sink "
            "behind the queue (history database, collector) is too slow or down.",
            [
                p.prom(
                    by(
                        "max",
                        "app_name, queue",
                        f"{sel(cat.LISTENER_QUEUE_SIZE, app)} / "
                        f"{sel(cat.LISTENER_QUEUE_CAPACITY, app)}",
                    ),
                    "{{queue}}",
                )
            ],
            "percentunit",
            width=8,
        ),
        p.graph(
            "Spark listener bus events dropped",
            "Events Spark itself dropped from a full listener bus queue, per queue: lost for every "
            "listener of that queue (streams: all streaming listeners, sparkwatch's included). "
            "Classic mode only; see the SparkListenerBusDroppingEvents runbook.",
            [
                p.prom(
                    _increase("app_name, queue", cat.LISTENER_BUS_EVENTS_DROPPED, app),
                    "{{queue}}",
                )
            ],
            width=12,
        ),
        p.graph(
            "Spark listener bus queue fill",
            "Share of each of Spark's listener bus queues in use. Near 1 Spark starts dropping "
            "events: a slow listener holds the queue, or too many tasks post events.",
            [
                p.prom(
                    by(
                        "max",
                        "app_name, queue",
                        f"{sel(cat.LISTENER_BUS_QUEUE_SIZE, app)} / "
                        f"{sel(cat.LISTENER_BUS_QUEUE_CAPACITY, app)}",
                    ),
                    "{{queue}}",
                )
            ],
            "percentunit",
            width=12,
        ),
        p.graph(
            "Listener delivery failures",
            "Failed attempts to write the history or push to the collector, per sink. The "
            "listener retries with backoff; persistent failures fill the queue above.",
            [
                p.prom(
                    _increase("app_name, sink", cat.LISTENER_DELIVERY_FAILURES, app),
                    "{{sink}}",
                )
            ],
            width=24,
            height=6,
        ),
    ]


def build(config: Config) -> dict[str, Any]:
    return prometheus_board(UID, TITLE, DESCRIPTION, [
        ("Queries", [*counters(), queries_table()]),
        ("Throughput and latency", throughput(config)),
        ("State and watermark", state_and_watermark(config)),
        ("sparkwatch listener", listener()),
    ])
