"""``sparkwatch.attach(spark)``: wire receiver, intake, exporter and history for one session."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry

from sparkwatch.console.app import Console
from sparkwatch.console.history import HistoryData
from sparkwatch.listener.announce import (
    Destinations,
    announce,
    attach_line,
    disabled_line,
    stop_line,
)
from sparkwatch.listener.bus_sampler import BusSampler, make_bus_sampler
from sparkwatch.listener.exporter import ExporterError, MetricsServer, serve_metrics
from sparkwatch.listener.history_sink import HistorySink
from sparkwatch.listener.intake import Handler, Intake
from sparkwatch.listener.plan_reader import Deliver, PlanReader, make_plan_reader
from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.listener.receivers import JvmReceiver, make_public_listener, register_jvm
from sparkwatch.metrics import profiles
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.stats import ListenerCounters, ListenerStats
from sparkwatch.model.events import AppInfo
from sparkwatch.model.parse import fitted_app
from sparkwatch.plan.model import QueryPlan
from sparkwatch.plan.wire import plan_to_wire
from sparkwatch.settings import (
    LISTENER_FIELDS,
    ListenerSettings,
    SettingsError,
    load_listener_settings,
)
from sparkwatch.settings.listener import given_at
from sparkwatch.version import __version__

if TYPE_CHECKING:  # the otlp extra is imported only when OTLP export is switched on
    from sparkwatch.otlp.export import OtlpExport

log = logging.getLogger(__name__)

EVICT_EVERY_SECONDS = 5.0
"""Longest gap between two evictions of ended queries on the intake thread (shorter when the
grace is): the listener's own memory must not wait for a scrape that may never come."""
SERVER_STOP_SECONDS = 0.1
"""What detach() gives the /metrics server to stop when the other stages used the deadline up
(its thread ends within a millisecond or two of being told)."""
FINAL_COUNT_READS = 5
"""Reads of the stop line's counts at most, for them to agree with what the stages hold."""
RUN_ORIGIN = "sparkwatch run, settings from SPARKWATCH_* and spark.sparkwatch.*"


class Holding(Protocol):
    """A stage that can say how many events it still holds (queued or in hand)."""

    def held(self) -> int: ...


_attaching = threading.Lock()
# Session -> its attachment (live until detached); weak: a session that is gone is not kept.
_attached: weakref.WeakKeyDictionary[Any, Attachment] = weakref.WeakKeyDictionary()


class Attachment:
    """A listener attached to one SparkSession, with its exporter state and history writer."""

    def __init__(
        self, settings: ListenerSettings, app: AppInfo, registry: CollectorRegistry,
        origin: str = "",
    ) -> None:
        self.settings = settings
        self.origin = origin
        """Who attached, and so where the settings came from (said to a second attach)."""
        self.app = app
        self.registry = registry
        self.selection = profiles.from_settings(settings)
        self.state = MetricState(
            terminated_grace_seconds=settings.terminated_grace_seconds,
            batch_buckets=self.selection.batch_buckets,
            phase_buckets=self.selection.phase_buckets,
        )
        self.counters = ListenerCounters()
        self.mode = "off"
        self.history: HistorySink | None = None
        self.push: PushSink | None = None
        self.plans: PlanReader | None = None
        self.intake: Intake | None = None
        self.server: MetricsServer | None = None
        self.console: Console | None = None
        self.bus: BusSampler | None = None
        self.otlp: OtlpExport | None = None
        self._announced = False
        self._remove: Callable[[], None] | None = None

    @property
    def live(self) -> bool:
        """Whether a listener of this attachment is on the session (attached, not detached)."""
        return self._remove is not None

    @property
    def metrics_port(self) -> int | None:
        return self.server.port if self.server else None

    def stats(self) -> ListenerStats:
        queues = {}
        if self.intake is not None:
            queues[Intake.QUEUE] = self.intake.queue_state()
        if self.history is not None:
            queues[HistorySink.QUEUE] = self.history.queue_state()
        if self.push is not None:
            queues[PushSink.QUEUE] = self.push.queue_state()
        parts = (self.intake, self.history, self.push, self.plans, self.bus, self.otlp)
        workers = {p.worker.name: p.worker.last_progress for p in parts if p is not None}
        bus = self.bus.latest if self.bus is not None else None
        return self.counters.snapshot(self.app, self.mode, __version__, queues, workers, bus)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every event received so far is exported, written and pushed; False when
        ``timeout`` (one deadline for all the stages) runs out first."""
        left = _countdown(timeout)
        if self.intake is None or not self.intake.flush(left()):
            return self.intake is None
        # Plans read so far go to the sinks before these are drained.
        if self.plans is not None and not self.plans.flush(left()):
            return False
        if self.push is not None and not self.push.flush(left()):
            return False
        return self.history is None or self.history.flush(left())

    def detach(self, timeout: float = 10.0) -> None:
        """Stop receiving, write what is queued, stop serving /metrics: all within ``timeout``
        (one deadline for every stage; a sink still busy at it is left to its daemon thread,
        and the stop line says how many events it still held)."""
        left = _countdown(timeout)
        holding = [s for s in (self.intake, self.history, self.push) if s is not None]
        if self._remove is not None:
            try:
                self._remove()
            except Exception:  # noqa: BLE001 - the session may already be gone
                self.counters.count_error("detach")
                log.debug("sparkwatch: removing the listener failed", exc_info=True)
            self._remove = None
        if self.intake is not None:
            self.intake.stop(left())
        if self.bus is not None:
            self.bus.stop(left())
            self.bus.sample_now()  # the final count of Spark's drops, for the stop line
        if self.plans is not None:
            # First, and given the time left to finish what is queued: a plan read by now still
            # reaches the push sink (a short app's only plan); what is still queued at the
            # deadline is dropped, with no further attempt at a history that is down. Hurried:
            # no backoff is waited out meanwhile.
            self.plans.hurry()
            self.plans.flush(left())
            self.plans.stop(left())
            self.plans = None
        if self.history is not None:
            self.history.stop(left())
            self.history = None
        if self.push is not None:
            self.push.stop(left())
            self.push = None
        if self.otlp is not None:  # after the sinks: the final export has their last counts
            self.otlp.stop(left())
            self.otlp = None
        if self.server is not None:
            self.server.stop(max(left(), SERVER_STOP_SECONDS))
            self.server = None
        if self.console is not None and self.console.history is not None:
            self.console.history.close()
            self.console = None
        atexit.unregister(self.detach)
        self._announce_stop(holding)

    def _announce_stop(self, holding: Sequence[Holding]) -> None:
        if not self._announced:
            return
        self._announced = False
        stats, unfinished = self._final_counts(holding)
        bus = stats.bus.dropped if stats.bus is not None else None
        announce(stop_line(self.app.id, sum(stats.received.values()),
                           sum(stats.dropped.values()), bus, unfinished))

    def _final_counts(self, holding: Sequence[Holding]) -> tuple[ListenerStats, int]:
        """The counters, and the events the stages of ``holding`` still hold: not counted
        dropped, for a daemon thread may yet write or push them. Read again while a stage left
        busy moves events on meanwhile (held before, dropped after), a few times at most."""
        held, stats = sum(s.held() for s in holding), self.stats()
        for _ in range(FINAL_COUNT_READS):
            again = sum(s.held() for s in holding)
            if again == held:
                break
            held, stats = again, self.stats()
        return stats, held


def _countdown(timeout: float) -> Callable[[], float]:
    """Seconds left of ``timeout`` counted from now (never negative)."""
    end = time.monotonic() + timeout
    return lambda: max(0.0, end - time.monotonic())


def attach(spark: Any, **overrides: Any) -> Attachment:
    """Attach to ``spark``; to a session already attached, returns that attachment.

    Settings: keyword overrides > SPARKWATCH_* env vars > spark.sparkwatch.* Spark conf.
    """
    return attach_from(spark, _caller(), overrides)


def attach_from(spark: Any, origin: str, overrides: Mapping[str, Any]) -> Attachment:
    """:func:`attach`, saying who attaches (``origin``): once per session until detached (an
    app run by ``sparkwatch run`` that attaches too would get a second listener, history
    writer and /metrics port)."""
    with _attaching:
        live = _live_attachment(spark)
        if live is not None:
            log.info("sparkwatch: this SparkSession is already attached (by %s); returning that "
                     "attachment, this call's settings are not applied", live.origin)
            return live
        att = _attach(spark, origin, overrides)
        if att.live:
            with contextlib.suppress(TypeError):  # not weak-referenceable: never remembered
                _attached[spark] = att
        return att


def _live_attachment(spark: Any) -> Attachment | None:
    try:
        att = _attached.get(spark)
    except TypeError:  # not weak-referenceable: a stand-in session, never remembered
        return None
    return att if att is not None and att.live else None


def _caller() -> str:
    """Where the app called :func:`sparkwatch.attach` (the first frame outside sparkwatch)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith(
            "sparkwatch"):
        frame = frame.f_back
    return (f"sparkwatch.attach() at {frame.f_code.co_filename}:{frame.f_lineno}, settings from "
            "its arguments, SPARKWATCH_* and spark.sparkwatch.*")


def _attach(spark: Any, origin: str, overrides: Mapping[str, Any]) -> Attachment:
    lookup = _session_conf(spark)
    conf = _spark_conf(lookup)
    settings = load_listener_settings(os.environ, conf, **overrides)
    app = _app_info(spark, settings, lookup)
    att = Attachment(settings, app, CollectorRegistry(auto_describe=False), origin)
    if not settings.enabled:
        # Said, not logged: a user who switched it off under spark-submit sees that it is off.
        announce(disabled_line(app.id, __version__))
        return att
    if settings.history_url:  # past `enabled`: an app that switched sparkwatch off loads no driver
        _check_history_url(settings.history_url, given_at("history_url", os.environ, conf,
                                                          overrides))
    collector = SparkwatchCollector(att.state, lambda: [att.stats()], selection=att.selection)
    att.registry.register(collector)
    if settings.metrics_enabled:
        att.server = _metrics_server(att)
    if settings.otlp:
        att.otlp = _otlp_export(att, collector, os.environ)
    handlers: list[tuple[str, Handler]] = [("metrics", att.state.apply)]
    if settings.history_url:
        att.history = _history_sink(settings, att.counters)
        handlers.append(("history", att.history))
    if settings.push_url:
        att.push = _push_sink(settings, att.counters)
        handlers.append(("push", att.push))
    # Operator identity from each run's executed plan, read on the reader's own thread; pushed
    # with the events, so that a collector names operators as this driver does.
    att.plans = make_plan_reader(spark, app, att.state, settings, _push_plans(att.push, app))
    att.plans.on_error = partial(att.counters.count_error, "plans")
    handlers.append(("plans", att.plans))
    # Ended queries are forgotten here too, not only at a scrape: with /metrics off (push only)
    # or never scraped, every query the app ever ran stayed in the driver's memory.
    att.intake = Intake(app, settings.queue_capacity, att.counters, handlers, att.state.evict,
                        min(EVICT_EVERY_SECONDS, max(settings.terminated_grace_seconds, 1.0)))
    try:
        att.mode, att._remove = _register(spark, settings.mode, att)
    except Exception as exc:  # noqa: BLE001 - the app runs on, unobserved, and says why
        att.counters.count_error("register")
        log.error("sparkwatch: not attached, no listener could be added to the session: %s", exc)
        att.detach(timeout=1.0)
        return att
    if not _is_connect(spark):  # in Spark Connect the bus lives in the server
        att.bus = make_bus_sampler(spark, settings.listener_bus_sample_seconds)
    atexit.register(att.detach)
    destinations = Destinations(
        app.id, att.mode, __version__,
        settings.metrics_address if att.server else None, att.metrics_port,
        settings.history_url, settings.push_url,
        att.otlp.destination if att.otlp is not None else None,
    )
    att._announced = True
    announce(attach_line(destinations))
    return att


def _metrics_server(att: Attachment) -> MetricsServer | None:
    """The /metrics endpoint, or None (one warning, counted) when its port cannot be had: a
    monitoring add-on never stops the app it watches."""
    settings = att.settings
    # The browser console on the same port: the history this driver writes (read-only), and
    # the live state for what the history has not written yet.
    history = HistoryData(settings.history_url) if settings.history_url else None
    att.console = Console(history, lambda _tenant: [att.state])
    try:
        return serve_metrics(att.registry, settings.metrics_address, settings.metrics_port,
                             att.console)
    except ExporterError as exc:
        att.counters.count_error("metrics_server")
        if settings.metrics_port_fallback and settings.metrics_port != 0:
            log.warning("sparkwatch: %s; serving /metrics on a free port instead", exc)
            try:
                return serve_metrics(att.registry, settings.metrics_address, 0, att.console)
            except ExporterError as again:
                exc = again
        log.warning("sparkwatch: %s; running without /metrics (history and push go on)", exc)
        return None


def _otlp_export(
    att: Attachment, collector: SparkwatchCollector, env: Mapping[str, str]
) -> OtlpExport | None:
    """The OTLP export of what /metrics shows, or None (one error, counted) when the otlp extra
    is missing: a monitoring add-on never stops the app it watches. A bad OTEL_* value raises
    SettingsError, as a bad SPARKWATCH_* value does."""
    from sparkwatch.otlp.config import otlp_config
    from sparkwatch.otlp.export import OtlpUnavailable, start_export

    config = otlp_config(env)

    def counted(ok: bool) -> None:
        if not ok:
            att.counters.count_delivery_failure("otlp")

    try:
        return start_export(config, collector.collect, {"service.name": att.app.name}, counted)
    except OtlpUnavailable as exc:
        att.counters.count_error("otlp")
        log.error("sparkwatch: %s; running without OTLP export", exc)
        return None


def _register(spark: Any, mode: str, att: Attachment) -> tuple[str, Callable[[], None]]:
    assert att.intake is not None
    # An event we could not take from Spark is lost: count it as dropped at the receiver.
    offer, on_error = att.intake.offer, partial(att.counters.count_dropped, "receive", 1)
    if mode in ("auto", "jvm") and not _is_connect(spark):
        try:
            return "jvm", register_jvm(spark, JvmReceiver(offer, on_error))
        except Exception:
            if mode == "jvm":
                raise
            log.warning(
                "sparkwatch: raw JVM events unavailable, using PySpark's listener API",
                exc_info=True,
            )
    elif mode == "jvm":
        raise RuntimeError("sparkwatch mode=jvm needs a classic SparkSession, not Spark Connect")
    listener = make_public_listener(offer, on_error)
    spark.streams.addListener(listener)
    return "public", lambda: spark.streams.removeListener(listener)


def _check_history_url(url: str, named: str) -> None:
    """Refuse a history URL that can never work (not a URL, a database or driver unknown or not
    installed, an in-memory SQLite) as a bad SPARKWATCH_* value is, instead of the writer's
    thread finding it once the app runs; nothing is connected to: a database that is down is an
    outage the writer rides out. ``named``: where the URL was given, as the error names it."""
    # Here, not in the settings' parser: the settings room may not import the history (pyproject).
    from sparkwatch.history.errors import HistoryUrlError
    from sparkwatch.history.urls import writable_url

    try:
        writable_url(url, "the driver")
    except HistoryUrlError as exc:
        raise SettingsError(f"{named}: {exc}") from None


def _history_sink(settings: ListenerSettings, counters: ListenerCounters) -> HistorySink:
    from sparkwatch.history.writer import HistoryWriter

    assert settings.history_url is not None
    writer = HistoryWriter(settings.history_url, migrate=settings.history_migrate,
                           lost_after_seconds=settings.history_lost_after_seconds)
    seconds = settings.history_rollup_seconds

    def roll_up() -> bool:
        return writer.roll_up(datetime.now(UTC), seconds)

    return HistorySink(
        writer,
        counters,
        capacity=settings.history_queue_capacity,
        batch_size=settings.history_batch_size,
        flush_seconds=settings.history_flush_seconds,
        maintenance=roll_up if seconds > 0 else None,
        maintenance_seconds=seconds,
    )


def _push_plans(push: PushSink | None, app: AppInfo) -> list[tuple[str, Deliver]]:
    if push is None:
        return []

    def deliver(plan: QueryPlan) -> None:
        push.offer_wire(plan_to_wire(app, plan, time.time()))

    return [("push", deliver)]


def _push_sink(settings: ListenerSettings, counters: ListenerCounters) -> PushSink:
    from sparkwatch.spool import Spool, SpoolBusy

    assert settings.push_url is not None
    spool = None
    if settings.push_spool_dir:
        try:
            # No fsync: the spool outlives a collector outage; a lost driver loses its memory too.
            spool = Spool(Path(settings.push_spool_dir), settings.push_spool_max_bytes, fsync=False)
        except (SpoolBusy, OSError) as exc:
            counters.count_error("push_spool")
            log.error("sparkwatch: push spool disabled, buffering in memory only: %s", exc)
    return PushSink(
        Endpoint(settings.push_url, settings.push_token, settings.push_timeout_seconds),
        counters,
        capacity=settings.push_queue_capacity,
        batch_size=settings.push_batch_size,
        flush_seconds=settings.push_flush_seconds,
        spool=spool,
        backoff=(min(0.5, settings.push_retry_max_seconds), settings.push_retry_max_seconds),
    )


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


ConfLookup = Callable[[str], "str | None"]


def _session_conf(spark: Any) -> ConfLookup:
    """The session's conf as a lookup: every key set, read at once where Spark can (4.x), for
    on Spark Connect each lookup is a round trip to the server, and an attach needs 33 of them
    (seconds from a notebook far from its cluster); else key by key (3.5)."""
    try:
        every = spark.conf.getAll
        return dict(every.items()).get
    except Exception:  # noqa: BLE001 - no getAll (3.5), or a server that refuses it

        def one(key: str) -> str | None:
            try:
                value = spark.conf.get(key, None)
            except Exception:  # noqa: BLE001 - Connect may refuse unknown keys
                return None
            return None if value is None else str(value)

        return one


def _spark_conf(lookup: ConfLookup) -> dict[str, str]:
    """The spark.sparkwatch.* keys set on the session (unset keys skipped)."""
    conf: dict[str, str] = {}
    for key in (field.conf_key for field in LISTENER_FIELDS if field.conf_key):
        value = lookup(key)
        if value is not None:
            conf[key] = value
    return conf


def _app_info(spark: Any, settings: ListenerSettings, lookup: ConfLookup) -> AppInfo:
    def conf(key: str, default: str) -> str:
        return lookup(key) or default

    name = settings.app_name or conf("spark.app.name", "spark")
    app_id = conf("spark.app.id", "")
    if not app_id and not _is_connect(spark):
        app_id = spark.sparkContext.applicationId
    # Cut as every event's app is: the listener's own series (and OTLP's service.name) carry it
    # too, and a 100,000-character app name made every scrape megabytes.
    return fitted_app(AppInfo(name=name, id=app_id or name,
                              spark_version=str(getattr(spark, "version", ""))))
