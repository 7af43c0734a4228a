"""The metric catalogue: every metric sparkwatch exports, defined once.

The embedded exporter, the collector, the generated docs (``docs/metrics.md``), the dashboards and
the alert rules all take names from here; nothing else spells a metric name.

Conventions: prefix ``spark_streaming_``, base units (seconds, bytes), ``_total`` only on counters,
bounded labels. Levels are gauges; per-batch amounts are counters accumulated across batches (so
``rate()``/``increase()`` stay exact when several batches fall between scrapes) and the last batch's
value is a gauge too; durations are histograms. A run id appears only in
``spark_streaming_query_info``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from sparkwatch.model.fields import OPERATOR_FIELDS, OperatorField
from sparkwatch.plan.describe import OPERATOR_IDENTITY_LABELS

PREFIX = "spark_streaming_"


class Kind(StrEnum):
    GAUGE = "gauge"
    COUNTER = "counter"
    HISTOGRAM = "histogram"
    INFO = "info"


APP_LABELS: tuple[str, ...] = ("app_name", "app_id")
QUERY_LABELS: tuple[str, ...] = APP_LABELS + ("query_id", "query_name")
OPERATOR_LABELS: tuple[str, ...] = QUERY_LABELS + ("operator", "operator_index")
SOURCE_LABELS: tuple[str, ...] = QUERY_LABELS + ("source_index", "source")


@dataclass(frozen=True, slots=True)
class MetricDef:
    """One metric family.

    ``name`` is the exposed name: counters end in ``_total``, info metrics in ``_info``.
    """

    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    source: str = ""
    """Where the value comes from in Spark's events (for the docs)."""
    idle: str = ""
    """What a last-batch gauge shows while its query is idle (for the docs)."""

    @property
    def family(self) -> str:
        """Name handed to prometheus_client's metric families, which append the suffixes."""
        if self.kind is Kind.COUNTER:
            return self.name.removesuffix("_total")
        if self.kind is Kind.INFO:
            return self.name.removesuffix("_info")
        return self.name


ALL: list[MetricDef] = []


def _def(name: str, kind: Kind, help: str, labels: tuple[str, ...], source: str = "",
         idle: str = "") -> MetricDef:
    metric = MetricDef(PREFIX + name, kind, help, labels, source, idle)
    if kind is Kind.COUNTER and not metric.name.endswith("_total"):
        raise ValueError(f"counter {metric.name} must end in _total")
    if kind is not Kind.COUNTER and metric.name.endswith("_total"):
        raise ValueError(f"{kind} {metric.name} must not end in _total")
    ALL.append(metric)
    return metric


G, C, H, I = Kind.GAUGE, Kind.COUNTER, Kind.HISTOGRAM, Kind.INFO  # noqa: E741
Q, O, S = QUERY_LABELS, OPERATOR_LABELS, SOURCE_LABELS  # noqa: E741

# --- application and listener ---------------------------------------------------------------
APP_INFO = _def(
    "app_info", I, "Spark application seen by sparkwatch.", APP_LABELS + ("spark_version",)
)
LISTENER_INFO = _def(
    "listener_info",
    I,
    "The sparkwatch listener attached to the app and how it receives events.",
    APP_LABELS + ("mode", "version"),
    "mode: jvm (raw JVM events) or public (PySpark's listener API)",
)
LISTENER_EVENTS_RECEIVED = _def(
    "listener_events_received_total",
    C,
    "Query events the listener received from Spark.",
    APP_LABELS + ("event",),
)
LISTENER_EVENTS_DROPPED = _def(
    "listener_events_dropped_total",
    C,
    "Events lost, by stage: receive (could not be taken from Spark), intake / history / push "
    "(a bounded queue was full or its sink gave up).",
    APP_LABELS + ("stage",),
)
LISTENER_EVENTS_DELIVERED = _def(
    "listener_events_delivered_total",
    C,
    "Events a sink delivered (sink push: accepted by the collector, or refused by it as invalid).",
    APP_LABELS + ("sink",),
)
LISTENER_DELIVERY_FAILURES = _def(
    "listener_delivery_failures_total",
    C,
    "Failed attempts to deliver events to a sink (history database, collector).",
    APP_LABELS + ("sink",),
)
LISTENER_ERRORS = _def(
    "listener_errors_total",
    C,
    "Listener failures caught instead of raised into the Spark app, by where they happened "
    "(metrics_server: the /metrics port was taken; register: no listener could be added; "
    "plans: a plan read failed; history_maintenance: a rollup failed; push_spool: the push "
    "spool could not be opened or read; detach: the listener could not be removed; otlp: the "
    "OTLP export could not start).",
    APP_LABELS + ("where",),
)
LISTENER_PARSE_ERRORS = _def(
    "listener_parse_errors_total",
    C,
    "Events Spark sent that could not be parsed.",
    APP_LABELS,
)
LISTENER_QUEUE_SIZE = _def(
    "listener_queue_size",
    G,
    "Events waiting in a listener queue.",
    APP_LABELS + ("queue",),
)
LISTENER_QUEUE_CAPACITY = _def(
    "listener_queue_capacity",
    G,
    "Capacity of a listener queue.",
    APP_LABELS + ("queue",),
)
LISTENER_WORKER_LAST_PROGRESS = _def(
    "listener_worker_last_progress_timestamp_seconds",
    G,
    "When a listener worker thread (intake, history, push, plans) last showed progress: it "
    "beats after each piece of work and while it waits, never while stuck inside a call. A "
    "value that stops moving is a hung worker.",
    APP_LABELS + ("worker",),
)

# --- Spark's listener bus (sampled in the driver, listener/bus_sampler.py) ---------------------
# Spark drops events for every listener of a full bus queue; these show it. Classic mode only.
_BUS = "sampled from Spark's LiveListenerBus metric registry"
LISTENER_BUS_EVENTS_POSTED = _def(
    "listener_bus_events_posted_total",
    C,
    "Events Spark posted to its listener bus (all queues), since the SparkContext started.",
    APP_LABELS,
    f"numEventsPosted, {_BUS}",
)
LISTENER_BUS_EVENTS_DROPPED = _def(
    "listener_bus_events_dropped_total",
    C,
    "Events Spark dropped from a listener bus queue because it was full: lost for every listener "
    "of that queue (queue streams: every streaming query listener, sparkwatch's included).",
    APP_LABELS + ("queue",),
    f"queue.<queue>.numDroppedEvents, {_BUS}",
)
LISTENER_BUS_QUEUE_SIZE = _def(
    "listener_bus_queue_size",
    G,
    "Events waiting in a listener bus queue.",
    APP_LABELS + ("queue",),
    f"queue.<queue>.size, {_BUS}",
)
LISTENER_BUS_QUEUE_CAPACITY = _def(
    "listener_bus_queue_capacity",
    G,
    "Capacity of a listener bus queue (spark.scheduler.listenerbus.eventqueue[.<queue>].capacity).",
    APP_LABELS + ("queue",),
    "Spark conf",
)
LISTENER_BUS_EVENTS_PROCESSED = _def(
    "listener_bus_events_processed_total",
    C,
    "Events a listener bus queue handed to its listeners.",
    APP_LABELS + ("queue",),
    f"queue.<queue>.listenerProcessingTime count, {_BUS}",
)
LISTENER_BUS_PROCESSING_MEAN = _def(
    "listener_bus_processing_mean_seconds",
    G,
    "Mean time a listener bus queue takes to hand one event to all its listeners (Spark's "
    "timer over recent events); a slow listener here fills the queue.",
    APP_LABELS + ("queue",),
    f"queue.<queue>.listenerProcessingTime mean, {_BUS}",
)
# --- end of Spark's listener bus ----------------------------------------------------------------

COLLECTOR_WORKER_LAST_PROGRESS = "sparkwatch_collector_worker_last_progress_timestamp_seconds"
"""The collector's own equivalent (one of its ``sparkwatch_collector_*`` self-metrics, outside
the catalogue), named here because the alert rules read it too."""

# --- query ------------------------------------------------------------------------------------
QUERY_INFO = _def(
    "query_info",
    I,
    "Current run of a query; the run id changes on every (re)start.",
    Q + ("run_id",),
    "QueryStartedEvent / progress id, runId, name",
)
QUERY_TRIGGER_INFO = _def(
    "query_trigger_info",
    I,
    "Trigger of the query's current run: processing_time, available_now, once, continuous or "
    "real_time (Spark 4.1+ real-time mode, whose batches last their whole interval by design).",
    Q + ("trigger",),
    "not in Spark's events: the JVM query's trigger, read with the plan (classic mode)",
)
QUERY_TRIGGER_INTERVAL = _def(
    "query_trigger_interval_seconds",
    G,
    "Interval of the current run's trigger: processing time, continuous checkpoint interval, "
    "or the batch duration of real-time mode (absent for available_now and once).",
    Q,
    "not in Spark's events: the JVM query's trigger, read with the plan (classic mode)",
)
QUERY_ACTIVE = _def("query_active", G, "1 while the query runs, 0 after it terminated.", Q)
QUERY_IDLE = _def("query_idle", G, "1 when the last event was QueryIdleEvent (no new data).", Q)
QUERY_FAILED = _def("query_failed", G, "1 when the query terminated with an exception.", Q)
QUERY_STALLED = _def(
    "query_stalled",
    G,
    "1 while the collector's stall detection marks the query's run as stalled (no progress and "
    "no idle event for N trigger intervals); collector only.",
    Q,
    "collector job over the history's query_runs.last_event_at",
)
QUERY_RUNS = _def("query_runs_total", C, "Runs (starts and restarts) of the query seen.", Q)
QUERY_FAILURES = _def(
    "query_failures_total",
    C,
    "Runs that terminated with an exception.",
    Q,
    "QueryTerminatedEvent.exception",
)
QUERY_START_TIME = _def(
    "query_start_time_seconds",
    G,
    "Start of the current run (Unix time).",
    Q,
    "QueryStartedEvent.timestamp",
)
QUERY_LAST_PROGRESS = _def(
    "query_last_progress_timestamp_seconds",
    G,
    "Timestamp of the last progress event (Unix time).",
    Q,
    "progress.timestamp",
)
QUERY_LAST_EVENT = _def(
    "query_last_event_timestamp_seconds",
    G,
    "Timestamp of the last progress or idle event (Unix time); stalled queries stop updating it.",
    Q,
    "progress.timestamp, QueryIdleEvent.timestamp",
)
QUERY_BATCH_ID = _def("query_batch_id", G, "Id of the last completed micro-batch.", Q, "batchId",
                      idle="the id of the last batch that ran")
QUERY_BATCHES = _def("query_batches_total", C, "Micro-batches completed.", Q, "progress events")
QUERY_INPUT_ROWS = _def(
    "query_input_rows_total",
    C,
    "Input rows processed, summed over batches.",
    Q,
    "numInputRows",
)
QUERY_LAST_INPUT_ROWS = _def(
    "query_last_batch_input_rows",
    G,
    "Input rows of the last batch.",
    Q,
    "numInputRows",
    idle="the last batch's input rows (not 0: no batch runs while idle)",
)
QUERY_INPUT_RATE = _def(
    "query_input_rows_per_second",
    G,
    "Rate at which data arrived (last batch).",
    Q,
    "inputRowsPerSecond",
    idle="0, as Spark's own inputRate-total gauge",
)
QUERY_PROCESSED_RATE = _def(
    "query_processed_rows_per_second",
    G,
    "Rate at which Spark processed data (last batch).",
    Q,
    "processedRowsPerSecond",
    idle="0, as Spark's own processingRate-total gauge",
)
QUERY_BATCH_DURATION = _def(
    "query_batch_duration_seconds",
    H,
    "Micro-batch duration.",
    Q,
    "batchDuration",
)
QUERY_LAST_BATCH_DURATION = _def(
    "query_last_batch_duration_seconds",
    G,
    "Duration of the last micro-batch.",
    Q,
    "batchDuration",
    idle="the last batch's duration",
)
QUERY_PHASE_DURATION = _def(
    "query_phase_duration_seconds",
    H,
    "Time per trigger phase (addBatch, latestOffset/getOffset, walCommit, queryPlanning, getBatch, "
    "commitOffsets, triggerExecution).",
    Q + ("phase",),
    "durationMs",
)
QUERY_LAST_PHASE_DURATION = _def(
    "query_last_phase_duration_seconds",
    G,
    "Time per trigger phase in the last batch.",
    Q + ("phase",),
    "durationMs",
    idle="the last batch's phase times",
)
QUERY_WATERMARK = _def(
    "query_watermark_timestamp_seconds",
    G,
    "Event-time watermark (Unix time).",
    Q,
    "eventTime.watermark",
    idle="the watermark the last batch set: it does not advance while idle",
)
QUERY_WATERMARK_LAG = _def(
    "query_watermark_lag_seconds",
    G,
    "How far the watermark trails the batch's processing time (progress timestamp - watermark).",
    Q,
    "timestamp - eventTime.watermark",
    idle=(
        "the lag at the last batch (its timestamp minus its watermark): it does not grow while "
        "idle"
    ),
)
QUERY_EVENT_TIME_MAX = _def(
    "query_event_time_max_timestamp_seconds",
    G,
    "Latest event time in the last batch with data.",
    Q,
    "eventTime.max",
    idle="the last batch with data's",
)
QUERY_EVENT_TIME_MIN = _def(
    "query_event_time_min_timestamp_seconds",
    G,
    "Earliest event time in the last batch with data.",
    Q,
    "eventTime.min",
    idle="the last batch with data's",
)
QUERY_EVENT_TIME_AVG = _def(
    "query_event_time_avg_timestamp_seconds",
    G,
    "Average event time in the last batch with data.",
    Q,
    "eventTime.avg",
    idle="the last batch with data's",
)
QUERY_EVENT_TIME_LAG = _def(
    "query_event_time_lag_seconds",
    G,
    "How late the newest event of the last batch with data was (progress timestamp - max).",
    Q,
    "timestamp - eventTime.max",
    idle="the lag at the last batch with data: it does not grow while idle",
)
QUERY_EVENT_TIME_SKEW = _def(
    "query_event_time_skew_seconds",
    G,
    "Spread of event times inside the last batch with data (max - min): how out of order data is.",
    Q,
    "eventTime.max - eventTime.min",
    idle="the last batch with data's",
)
QUERY_OBSERVED_METRIC = _def(
    "query_observed_metric",
    G,
    "Numeric values of Dataset.observe() metrics (last batch).",
    Q + ("observation", "column"),
    "observedMetrics",
    idle="the last batch's values",
)

# --- state operators ----------------------------------------------------------------------------
STATE_OPERATOR_INFO = _def(
    "state_operator_info",
    I,
    "What the operator is in the physical plan: kind, keys, output mode, watermark, state "
    "stores, provider, checkpoint (source=progress: plan not read, only kind is known).",
    O + OPERATOR_IDENTITY_LABELS,
    "executed plan of the run (listener, classic mode); operatorName otherwise",
)


StateFamilies = tuple[tuple[OperatorField, MetricDef], ...]
"""(field, family) pairs of one group of state families."""


def _state_families(kind: Kind, fields: Iterable[OperatorField], name: str,
                    help: Callable[[OperatorField], str], idle: str = ""
                    ) -> StateFamilies:
    """One family per field, named ``name`` with ``{stem}`` and ``{unit}`` (the base unit's
    suffix, e.g. ``_seconds`` for milliseconds) filled in; Spark's JSON name is its source."""
    out = []
    for f in fields:
        unit = f"_{f.base_unit}" if f.base_unit else ""
        out.append((f, _def(name.format(stem=f.metric, unit=unit), kind, help(f), O, f.json,
                            idle=idle)))
    return tuple(out)


def _level_help(f: OperatorField) -> str:
    return f.metric_help or f.help


def _last_help(f: OperatorField) -> str:
    return f.last_help or f.help


# The operator field table's families (sparkwatch.model.fields), in this order: the state's size
# (levels in rows or bytes), the counters' totals, the counters' last-batch gauges (amounts in
# rows before times), the operator's layout (the other levels).
_SIZE_UNITS = ("rows", "bytes")
_COUNTER_FIELDS = sorted((f for f in OPERATOR_FIELDS if f.counter), key=lambda f: f.unit != "rows")
STATE_SIZES = _state_families(
    G, (f for f in OPERATOR_FIELDS if not f.counter and f.unit in _SIZE_UNITS),
    "state_{stem}{unit}", _level_help)
STATE_TOTALS = _state_families(C, _COUNTER_FIELDS, "state_{stem}{unit}_total", _level_help)
STATE_LASTS = _state_families(G, _COUNTER_FIELDS, "state_last_batch_{stem}{unit}", _last_help,
                              idle="the last batch's value (no batch runs while idle)")
STATE_LAYOUT = _state_families(
    G, (f for f in OPERATOR_FIELDS if not f.counter and f.unit not in _SIZE_UNITS),
    "state_{stem}{unit}", _level_help)


def state_metric(group: StateFamilies, attr: str) -> MetricDef:
    """The family of field ``attr`` in ``group`` (one of the four above)."""
    for f, metric in group:
        if f.attr == attr:
            return metric
    raise KeyError(f"no {attr} in this group of state families")


# The fields dashboards, rules, profiles and `top` read by name.
STATE_ROWS = state_metric(STATE_SIZES, "num_rows_total")
STATE_MEMORY = state_metric(STATE_SIZES, "memory_used_bytes")
STATE_ROWS_UPDATED = state_metric(STATE_TOTALS, "num_rows_updated")
STATE_ROWS_REMOVED = state_metric(STATE_TOTALS, "num_rows_removed")
STATE_ROWS_DROPPED = state_metric(STATE_TOTALS, "num_rows_dropped_by_watermark")
STATE_UPDATE_TIME = state_metric(STATE_TOTALS, "all_updates_time_ms")
STATE_REMOVAL_TIME = state_metric(STATE_TOTALS, "all_removals_time_ms")
STATE_COMMIT_TIME = state_metric(STATE_TOTALS, "commit_time_ms")
STATE_LAST_ROWS_UPDATED = state_metric(STATE_LASTS, "num_rows_updated")
STATE_LAST_ROWS_REMOVED = state_metric(STATE_LASTS, "num_rows_removed")
STATE_LAST_ROWS_DROPPED = state_metric(STATE_LASTS, "num_rows_dropped_by_watermark")
STATE_LAST_UPDATE_TIME = state_metric(STATE_LASTS, "all_updates_time_ms")
STATE_LAST_REMOVAL_TIME = state_metric(STATE_LASTS, "all_removals_time_ms")
STATE_LAST_COMMIT_TIME = state_metric(STATE_LASTS, "commit_time_ms")
STATE_SHUFFLE_PARTITIONS = state_metric(STATE_LAYOUT, "num_shuffle_partitions")
STATE_STORE_INSTANCES = state_metric(STATE_LAYOUT, "num_state_store_instances")
STATE_CUSTOM_METRIC = _def(
    "state_custom_metric",
    G,
    "customMetrics keys sparkwatch has no dedicated metric for, raw value of the last batch.",
    O + ("metric",),
    "customMetrics (unknown keys)",
)
STATE_INSTANCE_METRIC_MIN = _def(
    "state_instance_metric_min",
    G,
    "Per-state-store-instance custom metrics (e.g. SnapshotLastUploaded): lowest reported value.",
    O + ("metric",),
    "customMetrics <metric>.partition_<p>_<store>",
)
STATE_INSTANCE_METRIC_MAX = _def(
    "state_instance_metric_max",
    G,
    "Per-state-store-instance custom metrics: highest reported value.",
    O + ("metric",),
    "customMetrics <metric>.partition_<p>_<store>",
)
STATE_INSTANCE_METRIC_REPORTED = _def(
    "state_instance_metric_reported",
    G,
    "How many state store instances reported the metric (Spark reports only the N lowest).",
    O + ("metric",),
    "customMetrics <metric>.partition_<p>_<store>",
)

# --- sources and sink -------------------------------------------------------------------------
SOURCE_INPUT_ROWS = _def(
    "source_input_rows_total",
    C,
    "Rows read from the source, summed over batches.",
    S,
    "sources[].numInputRows",
)
SOURCE_INPUT_RATE = _def(
    "source_input_rows_per_second",
    G,
    "Arrival rate at the source (last batch).",
    S,
    "sources[].inputRowsPerSecond",
    idle="0, as the query's rate",
)
SOURCE_PROCESSED_RATE = _def(
    "source_processed_rows_per_second",
    G,
    "Processing rate of the source (last batch).",
    S,
    "sources[].processedRowsPerSecond",
    idle="0, as the query's rate",
)
SOURCE_MIN_BEHIND = _def(
    "source_min_offsets_behind_latest",
    G,
    "Backlog: fewest offsets behind latest over partitions.",
    S,
    "sources[].metrics.minOffsetsBehindLatest (Kafka)",
    idle="the backlog the last batch saw: not measured again while idle",
)
SOURCE_MAX_BEHIND = _def(
    "source_max_offsets_behind_latest",
    G,
    "Backlog: most offsets behind latest over partitions.",
    S,
    "sources[].metrics.maxOffsetsBehindLatest (Kafka)",
    idle="the backlog the last batch saw: not measured again while idle",
)
SOURCE_AVG_BEHIND = _def(
    "source_avg_offsets_behind_latest",
    G,
    "Backlog: average offsets behind latest over partitions.",
    S,
    "sources[].metrics.avgOffsetsBehindLatest (Kafka)",
    idle="the backlog the last batch saw: not measured again while idle",
)
SOURCE_METRIC = _def(
    "source_metric",
    G,
    "Other numeric source metrics (last batch).",
    S + ("metric",),
    "sources[].metrics",
    idle="the last batch's values",
)
SINK_INFO = _def("sink_info", I, "The query's sink.", Q + ("description",), "sink.description")
SINK_OUTPUT_ROWS = _def(
    "sink_output_rows_total",
    C,
    "Rows written to the sink, summed over batches (V2 sinks only).",
    Q,
    "sink.numOutputRows",
)
SINK_METRIC = _def(
    "sink_metric", G, "Numeric sink metrics (last batch).", Q + ("metric",), "sink.metrics",
    idle="the last batch's values",
)

BATCH_DURATION_BUCKETS: tuple[float, ...] = (
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)
# Seven phases per query: few buckets keep the scrape small (they were half of all samples).
PHASE_DURATION_BUCKETS: tuple[float, ...] = (0.01, 0.05, 0.25, 1.0, 5.0, 30.0, 120.0)
