"""The periodic OTLP export: collect the families, convert, hand them to the SDK's OTLP exporter.

Why not a ``MeterProvider`` with observable instruments: OpenTelemetry's API has no observable
histogram, and the state already holds every series' cumulative value; re-recording it through
instruments would define each metric a second time. Python's SDK has no ``MetricProducer`` hook
either, so this module does what ``PeriodicExportingMetricReader`` does around its exporter (one
thread, an interval, a final export at shutdown) over the SDK's public data model
(``MetricsData``) and its public OTLP exporters, which keep their own configuration, retries and
encoding.

Export never blocks ingest or the Spark app: it runs on its own thread; a failed export is
counted (``on_result``) and said once per outage: one line of ours, and the first line the SDK's
exporter logs about it (its retries log one per attempt, every interval). Every line the SDK logs
is redacted first (:class:`_Redact`): its exporters log the URL they failed on, query string
included, and its header parser logs a malformed entry whole.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client.core import Metric as Family

from sparkwatch.otlp.config import EXTRA, GRPC, OtlpConfig
from sparkwatch.redact import MASK, redact_url
from sparkwatch.settings import SettingsError
from sparkwatch.summary import one_line
from sparkwatch.version import __version__
from sparkwatch.worker import Worker

log = logging.getLogger(__name__)

SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
)
"""Where the SDK's OTLP metric exporters log each failed attempt."""
SDK_ROOT = "opentelemetry"
"""Every logger of the SDK is under it: each one gets the redacting filter."""
SCOPE = "sparkwatch"
MAX_EXPORT_BATCH_SIZE = 2_000
"""Data points per request (the SDK splits an export into as many requests as it takes): a point
with its attributes, a histogram's with its buckets, encodes to under 1 KiB, so a request stays
under 2 MiB, below the 4 MiB an OpenTelemetry Collector's gRPC receiver takes by default (beyond
it, RESOURCE_EXHAUSTED: no export of a large state ever got through)."""
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_QUERY = re.compile(r"\?[^\s'\"()<>?]*=[^\s'\"()<>]*")


class OtlpUnavailable(SettingsError):
    """The OpenTelemetry SDK (the ``otlp`` extra) is not installed; the message says what to run
    (a SettingsError: the collector refuses to start with it, as with any setting it cannot
    honour)."""


def _sdk() -> Any:
    try:
        from opentelemetry.sdk.metrics import export
    except ImportError as exc:
        raise OtlpUnavailable("OTLP export is switched on but the OpenTelemetry SDK is not "
                              f"installed (no module {exc.name}): {EXTRA}") from None
    return export


def _exporter_class(config: OtlpConfig) -> Any:
    try:
        if config.protocol == GRPC:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
                OTLPMetricExporter,
            )
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
    except ImportError as exc:
        raise OtlpUnavailable(
            f"OTLP export over {config.protocol} is switched on but its exporter is not "
            f"installed (no module {exc.name}): {EXTRA}") from None
    return OTLPMetricExporter


def _exporter(exporter_class: Any, config: OtlpConfig) -> Any:
    # Headers, compression and certificates: the SDK reads its OTEL_EXPORTER_OTLP_* (the headers
    # checked by otlp_config first); the timeout is given as otlp_config checked it.
    kwargs: dict[str, Any] = {}
    if config.protocol != GRPC and not config.own_session:
        # Bounded requests against an endless answer, a drip, a redirect (otlp.transport).
        # A session of the user's own (a credential provider) is left as it is.
        from sparkwatch.otlp.transport import BoundedSession

        kwargs["session"] = BoundedSession()
    return exporter_class(endpoint=config.endpoint, timeout=config.request_timeout_seconds,
                          max_export_batch_size=MAX_EXPORT_BATCH_SIZE, **kwargs)


def resource(defaults: Mapping[str, str]) -> Any:
    """``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` (read by the SDK), over
    ``defaults``: a service name the user gave always wins over ours."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    merged = Resource(dict(defaults)).merge(Resource.create())  # the SDK's and the user's win
    if str(merged.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        # No name given: the SDK's placeholder says nothing, ours names the app or the collector.
        merged = merged.merge(Resource({SERVICE_NAME: defaults.get(SERVICE_NAME, SCOPE)}))
    return merged


def redact_text(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without ``secrets`` (masked), URL credentials or query strings."""
    for secret in secrets:
        text = text.replace(secret, MASK)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return _QUERY.sub("?…", text)  # a bare path's query string: "with url: /v1/metrics?token=…"


class _Redact(logging.Filter):
    """Rewrites each record of the SDK's loggers before any handler sees it: the message with its
    arguments and the traceback, redacted (a handler formats the text it is given)."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a filter that raises would raise into the SDK's export
            message = f"{record.msg} (its arguments did not format)"
        record.msg, record.args = redact_text(message, self.secrets), None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, redact_text(text, self.secrets)
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text, self.secrets)
        if record.stack_info:
            record.stack_info = redact_text(record.stack_info, self.secrets)
        return True


def _sdk_loggers() -> list[logging.Logger]:
    """The SDK's loggers that exist now (a filter on a logger sees only its own records, not its
    children's: each one gets it)."""
    names = [SDK_ROOT, *(n for n in logging.root.manager.loggerDict
                         if n.startswith(SDK_ROOT + "."))]
    return [logging.getLogger(n) for n in names]


class _SayOnce(logging.Filter):
    """Lets one record of the SDK's exporter through per outage (it logs every retry), and keeps
    the first of each export's: the SDK's exporter returns only FAILURE, its reason (a status
    and its reason phrase, a timeout, a connection refused) is in what it logs."""

    def __init__(self) -> None:
        super().__init__()
        self.said = False
        self.first: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if self.first is None:
            self.first = record.getMessage()  # redacted: _Redact was added to the logger first
        if self.said:
            return False
        self.said = True
        return True


class OtlpExport:
    """Exports what ``collect`` returns every ``config.interval_seconds`` until stopped, then once
    more. ``on_result(ok)`` hears of every export attempt."""

    def __init__(self, config: OtlpConfig, collect: Callable[[], Iterable[Family]],
                 resource_defaults: Mapping[str, str],
                 on_result: Callable[[bool], None] | None = None) -> None:
        export = _sdk()
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from sparkwatch.otlp.convert import Converter

        self.config = config
        self._export = export
        self._redact = _Redact(config.secrets)
        exporter_class = _exporter_class(config)  # imported: its modules' loggers exist
        self._watch_sdk_logs()  # before it is built: it parses the headers, and logs, then
        self._exporter = _exporter(exporter_class, config)
        self._resource = resource(resource_defaults)
        self._scope = InstrumentationScope(SCOPE, __version__)
        self._collect = collect
        self._on_result = on_result
        self._converter = Converter(time.time_ns())
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._gate = _SayOnce()
        self.exports = 0
        self.failures = 0
        self._failing = False
        self.worker = Worker("otlp", self._run, "sparkwatch-otlp")

    @property
    def destination(self) -> str:
        return f"{redact_url(self.config.endpoint)} ({self.config.protocol})"

    def _watch_sdk_logs(self) -> None:
        """The redacting filter on every SDK logger, again at start: importing the exporter
        creates more of them."""
        for logger in _sdk_loggers():
            if self._redact not in logger.filters:
                logger.addFilter(self._redact)

    def start(self) -> OtlpExport:
        self._watch_sdk_logs()
        for name in SDK_LOGGERS:
            logging.getLogger(name).addFilter(self._gate)
        self.worker.start()
        return self

    def _run(self) -> None:
        while not self.worker.wait(self.config.interval_seconds, self._stop):
            self.export_now()
            self.worker.beat()
        self.export_now()  # the final export: what changed since the last interval

    def export_now(self) -> bool:
        """One export of the current state; False when it failed (counted, said once)."""
        with self._lock:  # never two exports at once (the SDK's exporters are not reentrant)
            try:
                metrics = self._converter.metrics(self._collect(), time.time_ns())
                if not metrics:
                    return True
                e = self._export
                data = e.MetricsData([e.ResourceMetrics(
                    self._resource, [e.ScopeMetrics(self._scope, metrics, "")], "")])
                self._gate.first = None
                result = self._exporter.export(
                    data, timeout_millis=self.config.timeout_seconds * 1000)
                ok = result is e.MetricExportResult.SUCCESS
                why = self._gate.first or "the exporter gave no reason"
            except Exception as exc:  # noqa: BLE001 - an export never raises into its caller
                ok, why = False, one_line(exc)
            self._counted(ok, why)
            return ok

    def _counted(self, ok: bool, why: str) -> None:
        self.exports += 1
        if ok:
            if self._failing:
                log.info("sparkwatch: OTLP export to %s works again", self.destination)
            self._failing = self._gate.said = False
        else:
            self.failures += 1
            if not self._failing:
                log.warning("sparkwatch: OTLP export to %s failed (%s); retried every %g s, "
                            "failures counted, said again only once it works", self.destination,
                            why, self.config.interval_seconds)
            self._failing = True
        if self._on_result is not None:
            self._on_result(ok)

    def stop(self, timeout: float = 5.0) -> None:
        """Export once more and stop, within ``timeout``: an export still retrying then is cut
        short (the SDK exporter's shutdown ends its retries)."""
        self._stop.set()
        self.worker.join(timeout)
        try:
            self._exporter.shutdown(timeout_millis=max(timeout, 0.1) * 1000)
        except Exception:  # noqa: BLE001 - a failing shutdown only loses what was unsent
            log.debug("sparkwatch: OTLP exporter shutdown failed", exc_info=True)
        self.worker.join(1.0)
        for name in SDK_LOGGERS:
            logging.getLogger(name).removeFilter(self._gate)
        for logger in _sdk_loggers():
            logger.removeFilter(self._redact)


def start_export(config: OtlpConfig, collect: Callable[[], Iterable[Family]],
                 resource_defaults: Mapping[str, str],
                 on_result: Callable[[bool], None] | None = None) -> OtlpExport:
    """A running export; raises :class:`OtlpUnavailable` when the ``otlp`` extra is missing."""
    return OtlpExport(config, collect, resource_defaults, on_result).start()
