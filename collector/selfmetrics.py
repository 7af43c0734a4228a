"""The collector's own health metrics (``sparkwatch_collector_*``), on the injected registry.

Separate from the catalogue (``spark_streaming_*``, what Spark reports): these describe the
collector process, so that ingest refusals, spool growth and history failures can be alerted on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from sparkwatch.metrics.catalogue import COLLECTOR_WORKER_LAST_PROGRESS
from sparkwatch.worker import Worker

PREFIX = "sparkwatch_collector_"


class SelfMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # `_created` series only double the output; the catalogue's families have none either.
        disable_created_metrics()
        def counter(name: str, help: str, labels: Iterable[str] = ()) -> Counter:
            return Counter(PREFIX + name, help, list(labels), registry=registry)

        def gauge(name: str, help: str, labels: Iterable[str] = ()) -> Gauge:
            return Gauge(PREFIX + name, help, list(labels), registry=registry)

        self.requests = counter("ingest_requests", "Ingest requests answered, by status code.",
                                ["code"])
        self.accepted = counter("events_accepted", "Events accepted (spooled, in /metrics).")
        self.duplicates = counter(
            "events_duplicate", "Accepted progress events already applied (redeliveries)."
        )
        self.rejected = counter(
            "events_rejected", "Events refused, by reason (invalid, forbidden_app, limit).",
            ["reason"],
        )
        self.quota_rejections = counter(
            "quota_rejections", "Events refused for a tenant's quota, by tenant and quota "
            "(the setting's name, e.g. max_apps, max_events_per_second).", ["tenant", "quota"])
        self.written = counter("history_events_written", "Events written to the history.")
        self.write_failures = counter("history_write_failures",
                                      "Failed history write attempts (each is retried).")
        self.quarantined = counter(
            "events_quarantined", "Events the history could not store, set aside in the "
            "quarantine file beside the spool (sparkwatch quarantine list).")
        self.history_up = gauge("history_up", "1 when the last history write succeeded.")
        self.spool_bytes = gauge("spool_bytes", "Bytes in the spool not yet in the history.")
        self.spool_capacity = gauge("spool_capacity_bytes", "Bound of the spool.")
        self.spool_writable = gauge(
            "spool_writable", "1 when the last spool append succeeded; 0 while the disk refuses "
            "appends (full, I/O error) and ingest answers 503, whatever spool_bytes says.")
        self.inflight_bytes = gauge("ingest_inflight_bytes",
                                    "Request bytes being decoded now (bodies, inflated).")
        self.inflight_capacity = gauge("ingest_inflight_capacity_bytes",
                                       "Bound of the request bytes decoded at once.")
        self._spool_write_failures: Callable[[], int] = lambda: 0
        self._spool_tenants: Callable[[], Mapping[str, int]] = dict
        registry.register(_GaugesOf(
            PREFIX + "spool_tenant_bytes",
            "Bytes in the spool not yet in the history, by tenant (each may hold its "
            "--spool-tenant-share of the spool while the tokens name several): which tenant's "
            "backlog fills it.", "tenant", lambda: self._spool_tenants()))
        registry.register(_CounterOf(
            PREFIX + "spool_write_failures",
            "Spool writes the disk refused (full, I/O error): appends answered 503, cursor "
            "writes retried.", lambda: self._spool_write_failures()))
        self.job_runs = counter("job_runs", "Scheduled job executions by outcome "
                                "(ran, skipped: another replica has the slot, failed).",
                                ["job", "outcome"])
        self.slow_clients = counter(
            "slow_clients_closed", "Connections closed for sending their request headers or body "
            "slower than the deadline (header_timeout_seconds, body_timeout_seconds).", ["phase"])
        self.otlp_exports = counter(
            "otlp_exports", "OTLP exports of the catalogue (--otlp), by outcome (ok, failed).",
            ["outcome"])
        self.token_reloads = counter("token_reloads", "Reloads of the tokens file (SIGHUP), by "
                                     "outcome.", ["outcome"])
        self.worker_progress = Gauge(
            COLLECTOR_WORKER_LAST_PROGRESS,
            "When a background worker last showed progress (Unix time): it beats after each "
            "piece of work and while it waits, never while stuck inside a call.",
            ["worker"], registry=registry)
        self.history_up.set(1)
        self.spool_writable.set(1)
        for reason in ("invalid", "forbidden_app", "limit"):
            self.rejected.labels(reason)

    def count_outcome(self, accepted: int, duplicates: int, reasons: list[str]) -> None:
        self.accepted.inc(accepted)
        self.duplicates.inc(duplicates)
        for reason in reasons:
            self.rejected.labels(reason).inc()

    def quota_rejected(self, tenant: str, quota: str, events: int = 1) -> None:
        self.quota_rejections.labels(tenant, quota).inc(events)

    def track_worker(self, worker: Worker) -> None:
        self.worker_progress.labels(worker.name).set_function(lambda: worker.last_progress)

    def track_spool(self, pending_bytes: Callable[[], int], capacity: int,
                    write_failures: Callable[[], int],
                    tenants: Callable[[], Mapping[str, int]] | None = None) -> None:
        """``tenants``: the pending bytes of each tenant with records in the spool."""
        self.spool_bytes.set_function(pending_bytes)
        self.spool_capacity.set(capacity)
        self._spool_write_failures = write_failures
        if tenants is not None:
            self._spool_tenants = tenants

    def track_spool_appends(self, failing: Callable[[], object]) -> None:
        """``failing()``: why the last append failed, or None (:attr:`.Spool.append_error`)."""
        self.spool_writable.set_function(lambda: 0 if failing() else 1)

    def track_inflight(self, used: Callable[[], int], capacity: int) -> None:
        self.inflight_bytes.set_function(used)
        self.inflight_capacity.set(capacity)


class _CounterOf(Collector):
    """A counter kept elsewhere (the spool counts its own failures: it is shared with the
    listener, which has no collector registry)."""

    def __init__(self, name: str, help: str, value: Callable[[], int]) -> None:
        self._name, self._help, self._value = name, help, value

    def collect(self) -> Iterable[CounterMetricFamily]:
        yield CounterMetricFamily(self._name, self._help, value=self._value())


class _GaugesOf(Collector):
    """A gauge per label value of a map kept elsewhere (read at each scrape): values gone from
    the map go from the exposition too."""

    def __init__(self, name: str, help: str, label: str,
                 values: Callable[[], Mapping[str, int]]) -> None:
        self._name, self._help, self._label, self._values = name, help, label, values

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._help, labels=[self._label])
        for key, value in sorted(self._values().items()):
            family.add_metric([key], value)
        yield family
