"""Alerts on liveness: stalled and failed queries, and the listener losing events."""

from __future__ import annotations

from sparkwatch.dashboards.alerts import APP, QUERY, Alert, AlertFactory
from sparkwatch.dashboards.config import AlertConfig
from sparkwatch.dashboards.promql import increase, newly_increased, sel, silence_allowed
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.catalogue import MetricDef


def query_stalled(c: AlertConfig, s: str) -> Alert:
    limit, intervals = c.param("max_silence_seconds"), c.param("max_silence_trigger_intervals")
    last, start = sel(cat.QUERY_LAST_EVENT, s), sel(cat.QUERY_START_TIME, s)
    interval = sel(cat.QUERY_TRIGGER_INTERVAL, s)
    active = f"{sel(cat.QUERY_ACTIVE, s)} == 1"
    silence = f"time() - {last}"
    # A first batch that never ends (e.g. a source that cannot be reached) sends no event at
    # all: then the silence counts from the start of the run.
    since_start = f"time() - {start}"
    never = f"unless {last}"
    collector = f"{sel(cat.QUERY_STALLED, s)} == 1"
    expr = "\nor\n".join(
        [
            f"({silence} > {silence_allowed(interval, last, limit, intervals)}) and {active}",
            f"({since_start} > {silence_allowed(interval, start, limit, intervals)})"
            f" and {active} {never}",
            collector,
        ]
    )
    return Alert(
        "SparkStreamingQueryStalled",
        c,
        expr,
        summary="Query {{ $labels.query_name }} makes no progress.",
        description=f"{_cap(QUERY)} is active but reported neither progress nor idleness "
        f"for more than {limit} seconds, or {intervals} of its trigger intervals when that is "
        "longer (or the collector's stall detection marks it stalled): a batch hangs or the "
        "driver is stuck.",
        signals=(silence, since_start, sel(cat.QUERY_STALLED, s)),
        per=cat.QUERY_LAST_EVENT.labels,
    )


def query_failed(c: AlertConfig, s: str) -> Alert:
    failed = sel(cat.QUERY_FAILED, s)
    failures = increase(cat.QUERY_FAILURES, c.window, s)
    return Alert(
        "SparkStreamingQueryFailed",
        c,
        f"{failed} == 1\nor\n{failures} > 0",
        summary="Query {{ $labels.query_name }} failed.",
        description=f"{_cap(QUERY)} terminated with an exception (within the last "
        f"{c.window}, also if it was restarted since). The exception is in the history's "
        "query_runs table and on the History dashboard.",
        signals=(failed, failures),
        per=cat.QUERY_FAILED.labels,
    )


def _listener_counter(
    name: str, metric: MetricDef, summary: str, description: tuple[str, str]
) -> AlertFactory:
    """An alert on a listener's counter that grew within the window (or first appeared).

    ``description`` is the text before and after the window's length.
    """

    def factory(c: AlertConfig, s: str) -> Alert:
        w = c.window
        return Alert(
            name,
            c,
            newly_increased(metric, w, s, cat.LISTENER_INFO),
            summary=summary,
            description=description[0] + w + description[1],
            signals=(increase(metric, w, s),),
            per=metric.labels,
        )

    return factory


listener_dropping_events = _listener_counter(
    "SparkwatchListenerDroppingEvents",
    cat.LISTENER_EVENTS_DROPPED,
    "sparkwatch listener of app {{ $labels.app_name }} drops events ({{ $labels.stage }}).",
    (
        f"The sparkwatch listener in {APP} lost events at stage "
        "{{ $labels.stage }} during the last ",
        ": metrics or history miss batches.",
    ),
)
listener_bus_dropping_events = _listener_counter(
    "SparkListenerBusDroppingEvents",
    cat.LISTENER_BUS_EVENTS_DROPPED,
    "Spark's listener bus of app {{ $labels.app_name }} drops events (queue {{ $labels.queue }}).",
    (
        f"Spark's listener bus in {APP} dropped events from its full "
        "{{ $labels.queue }} queue during the last ",
        ": every listener of that queue "
        "missed them (queue streams: every streaming query listener, sparkwatch's included; "
        "appStatus: the Spark UI and its REST API).",
    ),
)
listener_delivery_failing = _listener_counter(
    "SparkwatchListenerDeliveryFailing",
    cat.LISTENER_DELIVERY_FAILURES,
    "sparkwatch listener of app {{ $labels.app_name }} cannot deliver to {{ $labels.sink }}.",
    (
        f"The sparkwatch listener in {APP} failed to deliver events to sink "
        "{{ $labels.sink }} during the last ",
        ". It retries with backoff; events are lost once its queue is full.",
    ),
)


QUARANTINED = "sparkwatch_collector_events_quarantined_total"


def collector_quarantining(c: AlertConfig, s: str) -> Alert:
    quarantined = increase(QUARANTINED, c.window)
    return Alert(
        "SparkwatchCollectorQuarantinedEvents",
        c,
        f"{quarantined} > 0",
        summary="The collector set events aside that its history could not store.",
        description="The history writer of collector {{ $labels.instance }} could not store "
        f"some events during the last {c.window} (a value or constraint the database refused) "
        "and moved them to its quarantine; every other event was written. List them with "
        "`sparkwatch quarantine list`, fix the cause, then `sparkwatch quarantine replay`.",
        signals=(quarantined,),
    )


def worker_hung(c: AlertConfig, s: str) -> Alert:
    limit = c.param("max_silence_seconds")
    listener = f"time() - {sel(cat.LISTENER_WORKER_LAST_PROGRESS, s)}"
    collector = f"time() - {sel(cat.COLLECTOR_WORKER_LAST_PROGRESS, s)}"
    return Alert(
        "SparkwatchWorkerHung",
        c,
        f"{listener} > {limit}\nor\n{collector} > {limit}",
        summary="sparkwatch worker {{ $labels.worker }} makes no progress.",
        description="The sparkwatch worker {{ $labels.worker }} (of the listener in app "
        "{{ $labels.app_name }} when app_name is set, else of the collector {{ $labels.instance "
        f"}}}}) showed no progress for more than {limit} seconds. Idle workers keep beating: "
        "this one is blocked inside a call that does not return, and its queue fills meanwhile.",
        signals=(listener, collector),
    )


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


FACTORIES: dict[str, AlertFactory] = {
    "query_stalled": query_stalled,
    "query_failed": query_failed,
    "listener_dropping_events": listener_dropping_events,
    "listener_bus_dropping_events": listener_bus_dropping_events,
    "listener_delivery_failing": listener_delivery_failing,
    "collector_quarantining": collector_quarantining,
    "worker_hung": worker_hung,
}
