"""What the OTLP export needs from OpenTelemetry's standard variables, read once at the edge.

Standard library only: the listener reads this before it knows whether the ``otlp`` extra is
installed. The exporter classes of the OpenTelemetry SDK read the rest of their variables
themselves when they are built (``OTEL_EXPORTER_OTLP[_METRICS]_HEADERS``, ``_TIMEOUT``,
``_COMPRESSION``, ``_CERTIFICATE``, ``OTEL_EXPORTER_OTLP_INSECURE``), and ``Resource.create()``
reads ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``: both happen at start, not later.
Here are the ones the SDK leaves to whoever runs the export: which protocol, where to (resolved
here so the attach line can say it), how often, and how long one export may take.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparkwatch.settings import SettingsError

EXTRA = "pip install 'sparkwatch[otlp]'"
"""What a user runs when the OpenTelemetry SDK is missing (named in every such error)."""

HTTP = "http/protobuf"
GRPC = "grpc"
PROTOCOLS = (HTTP, GRPC)
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
METRICS_PATH = "v1/metrics"
DEFAULT_INTERVAL_MS = 60_000.0
DEFAULT_TIMEOUT_MS = 30_000.0


@dataclass(frozen=True, slots=True)
class OtlpConfig:
    protocol: str = HTTP
    endpoint: str = f"{DEFAULT_HTTP_ENDPOINT}/{METRICS_PATH}"
    """The URL the exporter is given: for http/protobuf with the signal path."""
    interval_seconds: float = DEFAULT_INTERVAL_MS / 1000
    timeout_seconds: float = DEFAULT_TIMEOUT_MS / 1000


def _first(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """(name, value) of the first variable set to something, as the SDK treats empty as unset."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return name, value
    return None


def _millis(env: Mapping[str, str], name: str, default: float) -> float:
    found = _first(env, name)
    if found is None:
        return default / 1000
    try:
        value = float(found[1])
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise SettingsError(f"{name}={found[1]!r}: expected a positive number of milliseconds")
    return value / 1000


def otlp_config(env: Mapping[str, str]) -> OtlpConfig:
    """The export's protocol, endpoint, interval and timeout from ``env``, as the OpenTelemetry
    specification defines the variables; a bad value raises :class:`SettingsError` naming it."""
    protocol = HTTP
    found = _first(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if found is not None:
        protocol = found[1].lower()
        if protocol not in PROTOCOLS:
            raise SettingsError(f"{found[0]}={found[1]!r}: sparkwatch exports OTLP over "
                                f"{' or '.join(PROTOCOLS)}")
    signal = _first(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    base = _first(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    if signal is not None:
        endpoint = signal[1]  # the signal's own endpoint is used as it is
    elif protocol == GRPC:
        endpoint = base[1] if base is not None else DEFAULT_GRPC_ENDPOINT
    else:
        root = base[1] if base is not None else DEFAULT_HTTP_ENDPOINT
        endpoint = f"{root.rstrip('/')}/{METRICS_PATH}"
    return OtlpConfig(
        protocol=protocol,
        endpoint=endpoint,
        interval_seconds=_millis(env, "OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_INTERVAL_MS),
        timeout_seconds=_millis(env, "OTEL_METRIC_EXPORT_TIMEOUT", DEFAULT_TIMEOUT_MS),
    )
