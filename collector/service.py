"""The collector's parts, built from settings and started/stopped together.

Startup never waits for the database: the collector must accept events while it is down. The
schema is migrated from a background thread (retried), the spool's pending events are folded back
into the metric state so /metrics shows them again after a restart, and the history pump replays
them into the database once it is reachable.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlalchemy as sa
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from sparkwatch.collector.auth import Auth
from sparkwatch.collector.config import CollectorSettings, inflight_bound, spool_share
from sparkwatch.collector.history_process import WriterProcess, decode_tenant_records
from sparkwatch.collector.inflight import InflightBytes
from sparkwatch.collector.ingest import Ingestor, record_tenant
from sparkwatch.collector.leases import LeasedRunner
from sparkwatch.collector.limits import Caps
from sparkwatch.collector.owners import HistoryOwners
from sparkwatch.collector.pump import HistoryPump
from sparkwatch.collector.rates import Rates
from sparkwatch.collector.reads import Reads, ReadSlots, read_bounds
from sparkwatch.collector.scheduler import JobScheduler, add_history_jobs, start_scheduler
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.collector.stalls import StallBoard, StalledGauge
from sparkwatch.collector.tenants import Tenants, TenantsCollector
from sparkwatch.history import migrate, replicas
from sparkwatch.history.engine import create_engine, describe_url
from sparkwatch.history.running_plans import running_plans
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics import profiles
from sparkwatch.metrics.state import WAITING_PLANS_CAP, MetricState
from sparkwatch.spool import Spool
from sparkwatch.summary import one_line
from sparkwatch.worker import Backoff, Worker

if TYPE_CHECKING:  # the otlp extra is imported only with --otlp
    from sparkwatch.otlp.config import OtlpConfig
    from sparkwatch.otlp.export import OtlpExport

log = logging.getLogger(__name__)
INFLIGHT_WAIT_SECONDS = 5.0
"""How long a request waits for room under max_inflight_body_bytes before its 503."""


@dataclass
class Service:
    settings: CollectorSettings
    tenants: Tenants
    registry: CollectorRegistry
    metrics: SelfMetrics
    auth: Auth
    ingestor: Ingestor
    board: StallBoard
    inflight: InflightBytes
    byte_rates: Rates
    queries_exposition: Callable[[str | None], list[Metric]]
    """The queries' families (the catalogue and the stall gauge) of every tenant (None) or of one:
    what a tenant's read token reads at /api/v1/metrics."""
    spool: Spool | None = None
    pump: HistoryPump | None = None
    reads: Reads | None = None
    read_slots: ReadSlots = field(default_factory=lambda: ReadSlots(8))
    """The history reads (read API, console pages) running at once, on threads of their own."""
    engine: sa.Engine | None = None
    scheduler: JobScheduler | None = None
    otlp: OtlpExport | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        if self.pump is not None:
            self.pump.start()
        self.scheduler = start_scheduler(self.settings, self.ingestor.evict)
        if self.engine is not None:
            threading.Thread(target=self._prepare_history, name="collector-history-start",
                             daemon=True).start()
        if self.otlp is not None:
            self.otlp.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self.scheduler is not None:  # no job starts now; the running ones end at a step
            self.scheduler.stop(timeout)
        if self.otlp is not None:  # a final export of what ingest took before the stop
            self.otlp.stop(timeout)
        if self.pump is not None:
            self.pump.stop(timeout)
            self._forget_progress()
        if self.spool is not None:
            self.spool.close()
        if self.reads is not None:
            self.reads.close()
        if self.engine is not None:
            self.engine.dispose()

    def _forget_progress(self) -> None:
        """Stopped with every acknowledged event written: the other replicas' stall detection
        need not wait for this one's reports to age out (best effort: they do, in 5 minutes)."""
        if self.engine is None or self.pump is None or not self.pump.drained():
            return
        try:
            with self.engine.begin() as conn:
                replicas.forget(conn, self.settings.replica)
        except Exception as exc:  # noqa: BLE001 - stopping: the database may be why
            log.debug("replica progress not cleared: %s", one_line(exc))

    def workers(self) -> list[Worker]:
        """The long-running workers whose heartbeat /readyz judges."""
        return [self.pump.worker] if self.pump is not None else []

    def _prepare_history(self) -> None:
        """Upgrade the schema (so that jobs and reads work before the first event is written),
        then restore the plans of the runs still running, each retried while the database is
        down."""
        if self.settings.history_migrate:
            self._retry("history schema upgrade", migrate.upgrade)
        if self._stop.is_set():
            return
        assert self.engine is not None and self.scheduler is not None
        add_history_jobs(self.scheduler, self.settings,
                         LeasedRunner(self.engine, self.settings.replica, self.metrics,
                                      stopping=self._stop.is_set),
                         self.engine, self.board,
                         None if self.pump is None else self.pump.written_until)
        self._retry("restoring the plans of running runs", self._restore_plans)

    def _restore_plans(self, engine: sa.Engine) -> None:
        """Their listeners pushed each plan once: without this, operators would be named from
        the progress alone until each run restarts."""
        with engine.connect() as conn:
            found = running_plans(conn, WAITING_PLANS_CAP)
        for running in found:
            self.tenants.state(running.tenant).expect_plan(running.app, running.plan)
        log.info("%d plans of running runs restored to /metrics", len(found))

    def _retry(self, what: str, step: Callable[[sa.Engine], None]) -> None:
        assert self.engine is not None
        backoff = Backoff(1.0, 30.0)
        while not self._stop.is_set():
            try:
                step(self.engine)
                return
            except Exception as exc:  # noqa: BLE001 - the database may be down: retry
                delay = backoff.failed()
                # A warning: the history takes nothing until it succeeds (a database down at the
                # start, or one that will never do: another file, a newer schema). Each attempt
                # is a line, at info between the first and every 20th.
                level = logging.WARNING if backoff.failures % 20 == 1 else logging.INFO
                log.log(level, "%s failed (attempt %d), retrying in %.0f s: %s", what,
                        backoff.failures, delay, one_line(exc))
            self._stop.wait(delay)


def build_service(settings: CollectorSettings, otlp: OtlpConfig | None = None) -> Service:
    """The service's parts; ``otlp``: the OTLP export's configuration when ``settings.otlp`` is
    on (read from the OTEL_* variables at the edge), raising OtlpUnavailable without the extra."""
    selection = profiles.from_settings(settings)
    tenants = Tenants(lambda: MetricState(settings.terminated_grace_seconds,
                                          settings.stale_seconds,
                                          batch_buckets=selection.batch_buckets,
                                          phase_buckets=selection.phase_buckets))
    registry = CollectorRegistry(auto_describe=False)
    metrics = SelfMetrics(registry)
    board = StallBoard()
    families = TenantsCollector(tenants, selection)
    stalled = StalledGauge(tenants, board, selection.exports(cat.QUERY_STALLED))
    registry.register(families)
    registry.register(stalled)
    export = None
    if settings.otlp:
        export = _otlp_export(otlp, metrics, lambda: [*families.collect(), *stalled.collect()])
    spool = pump = reads = engine = None
    if settings.history_url:
        engine = create_engine(settings.history_url)  # checks URL and driver now, connects later
        # Each pending record's tenant counted again from the records: a tenant's share holds
        # what it left in the spool before a restart too.
        spool = Spool(settings.spool_dir, settings.spool_max_bytes, settings.spool_fsync,
                      owner_of=record_tenant)
        metrics.track_spool(lambda: spool.pending_bytes, settings.spool_max_bytes,
                            lambda: spool.write_failures, spool.owners)
        writer = WriterProcess(settings.history_url, settings.history_migrate, settings.spool_dir,
                               settings.quarantine_max_bytes)
        pump = HistoryPump(spool, writer, metrics, settings.write_batch_size,
                           deadline=settings.worker_deadline_seconds)
        metrics.track_worker(pump.worker)
        reads = Reads(settings.history_url, read_bounds(settings))
        # Provisional: an event admitted on a provisional claim (the history could not answer)
        # may name an id the history gives another tenant; the first request naming one asks.
        restored = sum(tenants.apply(tenant, event, provisional=True)
                       for tenant, event in decode_tenant_records(list(spool.pending())))
        log.info("history %s, spool %s (%d bytes pending, %d events restored to /metrics)",
                 describe_url(settings.history_url), settings.spool_dir, spool.pending_bytes,
                 restored)
    caps = Caps(settings.max_apps, settings.max_queries_per_app, settings.max_operators_per_query,
                settings.max_queries, settings.max_custom_metric_keys,
                settings.max_label_value_chars)
    event_rates = Rates("max_events_per_second", settings.max_events_per_second,
                        settings.rate_burst_seconds)
    byte_rates = Rates("max_bytes_per_second", settings.max_bytes_per_second,
                       settings.rate_burst_seconds)
    auth = Auth(settings.tokens, settings.read_token, settings.no_auth,
                settings.tenant_read_tokens, settings.scrape_token)
    inflight = InflightBytes(inflight_bound(settings), INFLIGHT_WAIT_SECONDS, auth.tenant_count)
    metrics.track_inflight(lambda: inflight.used, inflight.capacity)
    return Service(
        settings=settings, tenants=tenants, registry=registry, metrics=metrics, auth=auth,
        ingestor=Ingestor(tenants, spool, caps, metrics, event_rates,
                          None if reads is None else HistoryOwners(reads.owners),
                          lambda: spool_share(settings, auth.tenant_count()),
                          None if pump is None else pump.written_until),
        board=board,
        inflight=inflight, byte_rates=byte_rates,
        queries_exposition=lambda only: [*families.collect_for(only), *stalled.collect_for(only)],
        spool=spool,
        pump=pump, reads=reads, engine=engine, otlp=export,
        read_slots=ReadSlots(settings.read_concurrency, scopes=read_scopes(settings)),
    )


def read_scopes(settings: CollectorSettings) -> int:
    """How many read scopes share the read slots: each tenant with a read token, the admin."""
    return (len({tenant for tenant, _ in settings.tenant_read_tokens})
            + (settings.read_token is not None))


def _otlp_export(config: OtlpConfig | None, metrics: SelfMetrics,
                 collect: Callable[[], Iterable[Metric]]) -> OtlpExport:
    from sparkwatch.otlp.config import OtlpConfig
    from sparkwatch.otlp.export import OtlpExport

    def counted(ok: bool) -> None:
        metrics.otlp_exports.labels("ok" if ok else "failed").inc()

    for outcome in ("ok", "failed"):
        metrics.otlp_exports.labels(outcome)
    return OtlpExport(config or OtlpConfig(), collect, {"service.name": "sparkwatch-collector"},
                      counted)
