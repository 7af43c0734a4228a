"""Behaviour cases of every alert for ``promtool test rules``: at least one firing and one silent.

One function per alert (keyed like the config). Values derive from the alert's config section
(thresholds, windows), so the cases stay true to the rules whatever the defaults become.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from sparkwatch.dashboards.config import AlertConfig, Config
from sparkwatch.dashboards.promtool_model import Case, Series, first_minute_above, minutes
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.catalogue import MetricDef

APP = {"app_name": "orders-app", "app_id": "app-20260101-0001"}
QUERY = {**APP, "query_id": "6f1e0c2a", "query_name": "orders"}
OPERATOR = {**QUERY, "operator": "stateStoreSave", "operator_index": "0"}
SOURCE = {**QUERY, "source_index": "0", "source": "KafkaV2[Subscribe[orders]]"}
LISTENER = {**APP, "mode": "jvm", "version": "0.1.0"}
EPOCH_2026 = 1767225600
SAMPLE_SECONDS = 60  # the cases' input interval (promtool_model)


def burst_fires(c: AlertConfig) -> bool:
    """Whether one step of a counter fires the alert: it keeps ``increase()`` above 0 for
    ``window`` minutes, which must outlast ``for``. Otherwise the cases keep the counter growing
    (a single burst shorter than ``for`` rightly never fires)."""
    return minutes(c.seconds("for")) < minutes(c.seconds("window"))


def fires(name: str, *series: Series, at: int, silent_at: tuple[int, ...] = ()) -> Case:
    """The condition first holds at minute ``at``; the alert fires ``for`` later."""
    return Case("", name, series, true_from=at, silent_at=silent_at)


def silent(name: str, *series: Series, at: tuple[int, ...]) -> Case:
    return Case("", name, series, silent_at=at)


def samples(c: AlertConfig, extra: int = 10) -> int:
    """Samples per series: past the firing minute of a condition that holds from minute 1."""
    window = c.seconds("window") if c.window else 0
    return minutes(max(c.seconds("for"), window)) * 2 + extra


def state_unbounded(c: AlertConfig) -> list[Case]:
    n, floor = samples(c), int(c.param("min_rows"))

    def op(metric: MetricDef, values: str) -> Series:
        return Series(metric, OPERATOR, values)

    rows, removed = cat.STATE_ROWS, cat.STATE_ROWS_REMOVED
    growing, never = op(rows, f"{floor}+100x{n}"), op(removed, f"0x{n}")
    # Grows to half of min_rows; with min_rows 0 (or less) no state is small enough to be left out.
    below = [silent("silent for a state below min_rows", op(rows, f"0+{floor / (2 * n):.6f}x{n}"),
                    never, at=(n // 2, n))] if floor > 0 else []
    return [
        fires("fires when rows grow and none is removed", growing, never, at=1),
        silent(
            "silent when the watermark evicts rows",
            growing,
            op(removed, f"0+50x{n}"),
            at=(n // 2, n),
        ),
        *below,
        silent(
            "silent when the state size is flat",
            op(rows, f"{floor * 2}x{n}"),
            never,
            at=(n // 2, n),
        ),
    ]


def state_memory_filling_up(c: AlertConfig) -> list[Case]:
    n, limit = samples(c), int(c.param("limit_bytes"))
    horizon = minutes(c.seconds("horizon"))

    def memory(values: str) -> Series:
        return Series(cat.STATE_MEMORY, OPERATOR, values)

    # From half the limit, one limit per horizon crosses it; an eighth of one does not.
    return [
        fires(
            "fires when the trend passes the limit within horizon",
            memory(f"{limit // 2}+{-(-limit // horizon)}x{n}"),
            at=1,
        ),
        silent(
            "silent when memory is high but flat", memory(f"{limit * 9 // 10}x{n}"), at=(n // 2, n)
        ),
        silent(
            "silent when growth stays under the limit",
            # Under a quarter of the limit over the samples and the horizon together.
            memory(f"{limit // 2}+{limit // (8 * max(horizon, n))}x{n}"),
            at=(n // 2, n),
        ),
    ]


def watermark_lag(c: AlertConfig) -> list[Case]:
    n, limit = samples(c), c.param("max_seconds")

    def lag(value: float) -> Series:
        return Series(cat.QUERY_WATERMARK_LAG, QUERY, f"{value}x{n}")

    return [
        fires("fires when the lag stays above the threshold", lag(limit + 1), at=0),
        silent("silent at exactly the threshold", lag(limit), at=(n // 2, n)),
    ]


def watermark_not_advancing(c: AlertConfig) -> list[Case]:
    n = samples(c)
    stuck = Series(cat.QUERY_WATERMARK, QUERY, f"{EPOCH_2026}x{n}")
    arriving = Series(cat.QUERY_INPUT_ROWS, QUERY, f"0+100x{n}")
    return [
        fires("fires when input arrives and the watermark stays put", stuck, arriving, at=1),
        silent(
            "silent while the watermark advances",
            Series(cat.QUERY_WATERMARK, QUERY, f"{EPOCH_2026}+60x{n}"),
            arriving,
            at=(n // 2, n),
        ),
        silent(
            "silent when no input arrives",
            stuck,
            Series(cat.QUERY_INPUT_ROWS, QUERY, f"500x{n}"),
            at=(n // 2, n),
        ),
    ]


def rows_dropped_by_watermark(c: AlertConfig) -> list[Case]:
    n, ratio = samples(c), c.param("max_ratio")

    def late(per_minute: int) -> Series:
        return Series(cat.STATE_ROWS_DROPPED, OPERATOR, f"0+{per_minute}x{n}")

    def rows(per_minute: int) -> Series:
        return Series(cat.QUERY_INPUT_ROWS, QUERY, f"0+{per_minute}x{n}")

    five_times = max(1, round(ratio * 100 * 5))  # late rows per 100 input rows
    # With a share of 0 any late row fires: there is no share to stay under.
    under = [] if ratio <= 0 else [
        silent(
            "silent when late rows stay under the share",
            late(1),
            rows(int(1 / ratio) * 10),
            at=(n // 2, n),
        )
    ]
    return [
        fires("fires when late rows exceed the allowed share", late(five_times), rows(100), at=1),
        *under,
        silent("silent when no row is late", late(0), rows(100), at=(n // 2, n)),
    ]


def processing_slower_than_input(c: AlertConfig) -> list[Case]:
    n, ratio = samples(c), c.param("min_ratio")
    processed = Series(cat.QUERY_PROCESSED_RATE, QUERY, f"1000x{n}")

    def arrival(rate: float) -> Series:
        return Series(cat.QUERY_INPUT_RATE, QUERY, f"{rate:g}x{n}")

    return [
        fires("fires when input outpaces processing", arrival(1000 * ratio * 2), processed, at=0),
        silent(
            "silent within the allowed margin",
            arrival(1000 * (1 + (ratio - 1) / 2)),
            processed,
            at=(n // 2, n),
        ),
    ]


def source_backlog_growing(c: AlertConfig) -> list[Case]:
    n, floor = samples(c), int(c.param("min_offsets"))

    def behind(values: str) -> Series:
        return Series(cat.SOURCE_MAX_BEHIND, SOURCE, values)

    # Grows to half of min_offsets (it grew by one a sample, past a min_offsets of a few: the
    # generated test failed); with min_offsets 0 no backlog is small enough to be left out.
    small = [silent("silent when a growing backlog is still small",
                    behind(f"0+{floor / (2 * n):.6f}x{n}"), at=(n // 2, n))] if floor > 0 else []
    return [
        fires("fires when a large backlog keeps growing", behind(f"{floor * 2}+1000x{n}"), at=1),
        silent("silent when a large backlog is stable", behind(f"{floor * 5}x{n}"), at=(n // 2, n)),
        silent(
            "silent while the backlog shrinks",
            behind(f"{floor * 5}-{floor // 20}x{n}"),
            at=(n // 2, n),
        ),
        *small,
    ]


def batch_duration(c: AlertConfig) -> list[Case]:
    n = samples(c)
    # The case's query may have its own trigger interval in per_query.
    limit = c.param("per_query").get(QUERY["query_name"], c.param("max_seconds"))

    def batches(seconds_each: float) -> tuple[Series, Series]:
        h = cat.QUERY_BATCH_DURATION
        return (
            Series(h, QUERY, f"0+{seconds_each:g}x{n}", "_sum"),
            Series(h, QUERY, f"0+1x{n}", "_count"),
        )

    # Real-time mode: each batch lasts its whole interval by design (here four times the
    # configured limit), which the listener reads from the JVM.
    interval, ratio = limit * 4, c.param("real_time_max_ratio")

    def real_time(seconds: float) -> tuple[Series, Series]:
        return (Series(cat.QUERY_TRIGGER_INFO, {**QUERY, "trigger": "real_time"}, f"1x{n}"),
                Series(cat.QUERY_TRIGGER_INTERVAL, QUERY, f"{seconds:g}x{n}"))

    return [
        fires("fires when batches take twice the trigger interval", *batches(limit * 2), at=1),
        silent(
            "silent when batches take half the trigger interval",
            *batches(limit / 2),
            at=(n // 2, n),
        ),
        silent(
            "silent when real-time batches last their own interval, far above the limit",
            *batches(interval), *real_time(interval),
            at=(1, n // 2, n),
        ),
        fires(
            "fires when real-time batches overrun their own interval",
            *batches(interval * ratio * 2), *real_time(interval),
            at=1,
        ),
    ]


def query_stalled(c: AlertConfig) -> list[Case]:
    limit, intervals = c.param("max_silence_seconds"), c.param("max_silence_trigger_intervals")
    at = first_minute_above(limit)  # the condition is `silence > limit`
    n = at * 2 + 10
    active = Series(cat.QUERY_ACTIVE, QUERY, f"1x{n}")

    def last_event(values: str) -> Series:
        return Series(cat.QUERY_LAST_EVENT, QUERY, values)

    def trigger(seconds: int, samples: int) -> Series:
        return Series(cat.QUERY_TRIGGER_INTERVAL, QUERY, f"{seconds}x{samples}")

    short = 10  # seconds: a query that reports every 10 s keeps the global limit
    return [
        fires(
            "fires when an active query sends no event", active, last_event(f"0x{n}"), at=at
        ),
        fires(
            "fires at the global limit for a query with a short trigger",
            active,
            last_event(f"0x{n}"),
            trigger(short, n),
            at=first_minute_above(max(limit, intervals * short)),
        ),
        fires(
            "fires when the first batch never ends",
            active,
            Series(cat.QUERY_START_TIME, QUERY, f"0x{n}"),
            at=at,
        ),
        fires(
            "fires when the collector marks the query stalled",
            Series(cat.QUERY_STALLED, QUERY, f"1x{n}"),
            at=0,
        ),
        silent("silent while events keep coming", active, last_event(f"0+60x{n}"), at=(n // 2, n)),
        silent(
            "silent for a terminated query",
            Series(cat.QUERY_ACTIVE, QUERY, f"0x{n}"),
            last_event(f"0x{n}"),
            at=(n // 2, n),
        ),
        *_long_trigger(c),
    ]


def _long_trigger(c: AlertConfig) -> list[Case]:
    """A query whose trigger interval is longer than the global limit: silent while it reports
    once per trigger, stalled once silent for its intervals (when they allow more than the
    limit: with fewer than one interval allowed the global limit is all there is)."""
    limit, intervals = c.param("max_silence_seconds"), c.param("max_silence_trigger_intervals")
    if intervals < 1:
        return []
    every = max(2, 2 * minutes(limit))  # minutes between two events
    allowed = max(limit, intervals * every * 60)
    stalled_at = first_minute_above(allowed)
    n = max(3 * every, stalled_at + minutes(c.seconds("for"))) + 5
    reporting = " ".join(f"{i * every * 60}x{every - 1}" for i in range(n // every + 1))

    def query(last_event: str) -> tuple[Series, ...]:
        return (
            Series(cat.QUERY_ACTIVE, QUERY, f"1x{n}"),
            Series(cat.QUERY_LAST_EVENT, QUERY, last_event),
            Series(cat.QUERY_TRIGGER_INTERVAL, QUERY, f"{every * 60}x{n}"),
        )

    return [
        silent(
            "silent for a query whose long trigger spaces its events beyond the limit",
            *query(reporting),
            at=(every - 1, 2 * every - 1, n),
        ),
        fires(
            "fires when a query with a long trigger stays silent for its intervals",
            *query(f"0x{n}"),
            at=stalled_at,
        ),
    ]


def query_failed(c: AlertConfig) -> list[Case]:
    window = minutes(c.seconds("window"))
    n = window + 10

    def q(metric: MetricDef, values: str) -> Series:
        return Series(metric, QUERY, values)

    failed, failures = cat.QUERY_FAILED, cat.QUERY_FAILURES
    restarted = fires(
        "fires after a failure even if the query restarted, then resolves",
        q(failed, f"0x{n}"),
        q(failures, f"0 0 0 1x{n}"),
        at=3,
        silent_at=(3 + window + 1,),
    )
    return [
        fires(
            "fires when the query terminates with an exception",
            q(failed, f"0 0 0 1x{n}"),
            q(failures, f"0 0 0 1x{n}"),
            at=3,
        ),
        *([restarted] if burst_fires(c) else []),
        silent(
            "silent for a healthy query", q(failed, f"0x{n}"), q(failures, f"0x{n}"), at=(n // 2, n)
        ),
    ]


def _listener_window(c: AlertConfig) -> tuple[int, int, Series]:
    """The window in minutes, the samples per series (three windows) and the listener's info
    series, which the listener's alerts need beside a counter that appears late."""
    w = minutes(c.seconds("window"))
    n = max(w * 3, w + minutes(c.seconds("for")) + 5)
    return w, n, Series(cat.LISTENER_INFO, LISTENER, f"1x{n}")


def _after_restart(what: str, counter: Series, info: Series, w: int, n: int) -> Case:
    """A counter that stays at its old value (as after a Prometheus restart) does not fire."""
    return silent(f"silent for old {what} after a Prometheus restart", counter, info,
                  at=(w // 2, n))


def listener_dropping_events(c: AlertConfig) -> list[Case]:
    w, n, info = _listener_window(c)

    def dropped(stage: str, values: str) -> Series:
        return Series(cat.LISTENER_EVENTS_DROPPED, {**APP, "stage": stage}, values)

    step = "" if burst_fires(c) else "+5"
    return [
        fires("fires when a queue drops events", dropped("intake", f"0 0 0 5{step}x{n}"), info,
              at=3),
        fires(
            "fires when a drop stage first appears",
            dropped("receive", f"_x{w + 2} 7{step}x{n}"),
            info,
            at=w + 2,
        ),
        _after_restart("drops", dropped("intake", f"3x{n}"), info, w, n),
        silent("silent when nothing is dropped", dropped("intake", f"0x{n}"), info, at=(w // 2, n)),
    ]


def listener_bus_dropping_events(c: AlertConfig) -> list[Case]:
    w, n, info = _listener_window(c)

    def dropped(queue: str, values: str) -> Series:
        return Series(cat.LISTENER_BUS_EVENTS_DROPPED, {**APP, "queue": queue}, values)

    burst = burst_fires(c)
    return [
        fires("fires when Spark drops from a queue",
              dropped("streams", f"0 0 0 12x{n}" if burst else f"0 0 0 12+12x{n}"), info,
              at=3, silent_at=(3 + w + 1,) if burst else ()),
        _after_restart("drops", dropped("streams", f"40x{n}"), info, w, n),
        silent("silent when no queue drops", dropped("appStatus", f"0x{n}"), info,
               at=(w // 2, n)),
    ]


def listener_delivery_failing(c: AlertConfig) -> list[Case]:
    w, n, info = _listener_window(c)

    def failures(values: str) -> Series:
        return Series(cat.LISTENER_DELIVERY_FAILURES, {**APP, "sink": "history"}, values)

    # One failure at minute 1 keeps the condition true for `window` minutes only: silent as long
    # as `for` is at least the window (the default).
    brief = silent(
        "silent after a brief failure the sink recovered from",
        failures(f"0 1 1x{n}"),
        info,
        at=(w, w + 1, n),
    )
    return [
        fires("fires while deliveries keep failing", failures(f"0+2x{n}"), info, at=1),
        *([] if burst_fires(c) else [brief]),
        _after_restart("failures", failures(f"3x{n}"), info, w, n),
    ]


def collector_quarantining(c: AlertConfig) -> list[Case]:
    w = minutes(c.seconds("window"))
    n = max(w * 3, w + minutes(c.seconds("for")) + 5)
    collector = {"instance": "collector-0:9751", "job": "sparkwatch-collector"}

    def quarantined(values: str) -> Series:
        return Series("sparkwatch_collector_events_quarantined_total", collector, values)

    burst = burst_fires(c)
    return [
        fires("fires when an event is quarantined",
              quarantined(f"0 0 1x{n}" if burst else f"0 0 1+1x{n}"), at=2,
              silent_at=(w + 3, n) if burst else ()),
        silent("silent while nothing is quarantined", quarantined(f"0x{n}"), at=(1, w, n)),
    ]


def worker_hung(c: AlertConfig) -> list[Case]:
    limit = first_minute_above(c.param("max_silence_seconds")) - 1
    n = limit * 2 + 10
    push = {**APP, "worker": "push"}
    # Samples are Unix times; a beating worker's value follows the clock (60 s per minute).
    return [
        fires(
            "fires when a listener worker stops beating",
            Series(cat.LISTENER_WORKER_LAST_PROGRESS, push, f"0x{n}"),
            at=limit + 1,
        ),
        fires(
            "fires when the collector's history worker stops beating",
            Series(cat.COLLECTOR_WORKER_LAST_PROGRESS, {"worker": "history"}, f"0x{n}"),
            at=limit + 1,
        ),
        fires(
            "fires when a worker that was beating hangs",
            Series(cat.LISTENER_WORKER_LAST_PROGRESS, push, f"0+60x5 300x{n}"),
            at=5 + limit + 1,
        ),
        silent(
            "silent while workers beat (busy or idle)",
            Series(cat.LISTENER_WORKER_LAST_PROGRESS, push, f"0+60x{n}"),
            Series(cat.COLLECTOR_WORKER_LAST_PROGRESS, {"worker": "history"}, f"0+60x{n}"),
            at=(limit, n),
        ),
    ]


CASES: dict[str, Callable[[AlertConfig], list[Case]]] = {
    f.__name__: f
    for f in (
        state_unbounded,
        state_memory_filling_up,
        watermark_lag,
        watermark_not_advancing,
        rows_dropped_by_watermark,
        processing_slower_than_input,
        source_backlog_growing,
        batch_duration,
        query_stalled,
        query_failed,
        listener_dropping_events,
        listener_bus_dropping_events,
        listener_delivery_failing,
        collector_quarantining,
        worker_hung,
    )
}


def cases(config: Config) -> list[Case]:
    """Every case of every configured alert, tagged with the alert's config key; none for an
    alert whose window holds fewer than two of the cases' one-minute samples (a window made for
    a faster scrape): rate() over it has nothing to give at that sampling."""
    return [
        replace(case, alert=key)
        for key, make in CASES.items()
        if key in config.alerts and sampled(config.alert(key))
        for case in make(config.alert(key))
    ]


def sampled(c: AlertConfig) -> bool:
    """Whether the one-minute cases can test the alert (its window holds two samples)."""
    return c.window is None or c.seconds("window") >= SAMPLE_SECONDS
