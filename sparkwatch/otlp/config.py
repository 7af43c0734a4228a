"""What the OTLP export needs from OpenTelemetry's standard variables, read once at the edge.

Standard library only: the listener reads this before it knows whether the ``otlp`` extra is
installed. The exporter classes of the OpenTelemetry SDK read the rest of their variables
themselves when they are built (``OTEL_EXPORTER_OTLP[_METRICS]_HEADERS``, ``_COMPRESSION``,
``_CERTIFICATE``, ``OTEL_EXPORTER_OTLP_INSECURE``), and ``Resource.create()`` reads
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME``: both happen at start, not later.
Here are the ones the SDK leaves to whoever runs the export: which protocol, where to (resolved
here so the attach line can say it), how often, and how long one export may take.

The endpoint, the headers and the exporter's timeout are checked here too, although the SDK reads
them: the SDK accepts a bad one and then logs it verbatim (a password in the URL, a token in a
header written ``key:value``) on every export, drops a malformed header (an export without its
``authorization``) or retries forever. A bad value is refused at start instead, named by its
variable and never shown (it may be the secret).
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from sparkwatch.settings import SettingsError
from sparkwatch.settings.spec import SHOWN_CHARS
from sparkwatch.summary import quoted

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
MIN_INTERVAL_MS = 100.0
"""Ten exports a second at most: below, the export thread spins (0.0001 ms cost 78% of a CPU)."""
MAX_INTERVAL_MS = 86_400_000.0
"""A day: past it the export effectively never runs (1e308 ms slept for good)."""
MAX_TIMEOUT_MS = 3_600_000.0
"""An hour: an export that may take longer than that is a typo, not a choice."""
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
"""Seconds (the Python SDK's reading); the signal's own wins, as in the SDK."""
MIN_SECRET = 4
"""Shorter header values and passwords are not masked in the SDK's log lines (see otlp_config)."""
HEADER_VARIABLES = ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
# The SDK's own grammar (opentelemetry.util.re, liberal): an entry it does not match, it logs
# verbatim and drops. A name is an HTTP token; a value is URL-encoded printable ASCII.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*")
_HEADER_SEPARATOR = re.compile(r"[ \t]*,[ \t]*")


CREDENTIAL_PROVIDER = "OTEL_PYTHON_EXPORTER_OTLP_HTTP_METRICS_CREDENTIAL_PROVIDER"
"""The SDK's variable naming a ``requests.Session`` of the user's making to send with."""


@dataclass(frozen=True, slots=True)
class OtlpConfig:
    protocol: str = HTTP
    endpoint: str = f"{DEFAULT_HTTP_ENDPOINT}/{METRICS_PATH}"
    """The URL the exporter is given: for http/protobuf with the signal path."""
    interval_seconds: float = DEFAULT_INTERVAL_MS / 1000
    timeout_seconds: float = DEFAULT_TIMEOUT_MS / 1000
    request_timeout_seconds: float | None = None
    """``OTEL_EXPORTER_OTLP[_METRICS]_TIMEOUT`` as checked here (None: the SDK's default)."""
    own_session: bool = False
    """The user names a ``requests.Session`` of their own for OTLP/HTTP
    (:data:`CREDENTIAL_PROVIDER`): the SDK sends with it as it is, without our bounds."""
    secrets: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """What the SDK's log lines must never show: header values, the endpoint's password and
    query string (raw and decoded)."""


def _first(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """(name, value) of the first variable set to something, as the SDK treats empty as unset."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return name, value
    return None


def _number(found: tuple[str, str], low: float, high: float, unit: str) -> float:
    """The value of ``found`` within [``low``, ``high``] (above 0 when ``low`` is 0); a bad one
    is named with its value (a number, never a secret), cut short (it may be megabytes)."""
    name, raw = found
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0 and low <= value <= high):
        least = f"at least {low:.0f}" if low else "above 0"
        raise SettingsError(f"{name}={quoted(raw, SHOWN_CHARS)}: expected a number of {unit}, "
                            f"{least} and at most {high:.0f}")
    return value


def _millis(env: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    found = _first(env, name)
    if found is None:
        return default / 1000
    return _number(found, low, high, "milliseconds") / 1000


def _request_timeout(env: Mapping[str, str]) -> float | None:
    found = _first(env, *TIMEOUT_VARIABLES)
    if found is None:
        return None
    return _number(found, 0, MAX_TIMEOUT_MS / 1000, "seconds")


def _check_endpoint(name: str, url: str) -> None:
    """An http(s) URL with a host and a port in 1-65535, or an error naming ``name`` (never the
    URL: it can carry a password)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError when not a number or out of range
    except ValueError:
        parts, port = None, 0
    if (parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname
            or port == 0 or any(c.isspace() or not c.isprintable() for c in url)):
        raise SettingsError(f"{name}: expected an http:// or https:// URL with a host and a "
                            "port 1-65535 (the value is not shown: it may hold a password)")


def _url_secrets(url: str) -> list[str]:
    parts = urllib.parse.urlsplit(url)
    found = [parts.password or "", parts.query]
    return [*found, *(urllib.parse.unquote(s) for s in found)]


def _header_secrets(name: str, raw: str) -> list[str]:
    """The values in ``raw`` (``key=value,...``), each entry checked as the SDK parses it; a bad
    entry is named by its variable and position, its value never shown."""
    entries = [e.strip() for e in _HEADER_SEPARATOR.split(raw) if e.strip()]
    values: list[str] = []
    for number, entry in enumerate(entries, 1):
        key, equals, value = entry.partition("=")
        value = value.strip()
        decoded = urllib.parse.unquote(value)
        if (not equals or not _HEADER_NAME.fullmatch(key.strip())
                or not _HEADER_VALUE.fullmatch(value)
                or any(c in decoded for c in "\r\n\0")):
            raise SettingsError(
                f"{name}: entry {number} of {len(entries)} is not key=value with a valid header "
                "name and a URL-encoded value (e.g. authorization=Bearer%20TOKEN); the entry is "
                "not shown: it may hold a secret")
        values += [value, decoded]
    return values


def _headers(env: Mapping[str, str]) -> list[str]:
    # Both are checked although the SDK reads only the first set: a bad one is a mistake either way.
    secrets: list[str] = []
    for name in HEADER_VARIABLES:
        found = _first(env, name)
        if found is not None:
            secrets += _header_secrets(*found)
    return secrets


def otlp_config(env: Mapping[str, str]) -> OtlpConfig:
    """The export's protocol, endpoint, interval and timeout from ``env``, as the OpenTelemetry
    specification defines the variables; a bad value raises :class:`SettingsError` naming it."""
    protocol = HTTP
    found = _first(env, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if found is not None:
        protocol = found[1].lower()
        if protocol not in PROTOCOLS:
            raise SettingsError(f"{found[0]}={quoted(found[1], SHOWN_CHARS)}: sparkwatch exports "
                                f"OTLP over {' or '.join(PROTOCOLS)}")
    signal = _first(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
    base = _first(env, "OTEL_EXPORTER_OTLP_ENDPOINT")
    for given in (signal, base):
        if given is not None:
            _check_endpoint(*given)
    if signal is not None:
        endpoint = signal[1]  # the signal's own endpoint is used as it is
    elif protocol == GRPC:
        endpoint = base[1] if base is not None else DEFAULT_GRPC_ENDPOINT
    else:
        root = base[1] if base is not None else DEFAULT_HTTP_ENDPOINT
        endpoint = f"{root.rstrip('/')}/{METRICS_PATH}"
    # A value too short to be a secret (x-tenant=a) would mask every "a" of the SDK's lines.
    secrets = {s for s in [*_url_secrets(endpoint), *_headers(env)] if len(s) >= MIN_SECRET}
    return OtlpConfig(
        protocol=protocol,
        endpoint=endpoint,
        interval_seconds=_millis(env, "OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_INTERVAL_MS,
                                 MIN_INTERVAL_MS, MAX_INTERVAL_MS),
        timeout_seconds=_millis(env, "OTEL_METRIC_EXPORT_TIMEOUT", DEFAULT_TIMEOUT_MS,
                                0, MAX_TIMEOUT_MS),
        request_timeout_seconds=_request_timeout(env),
        own_session=_first(env, CREDENTIAL_PROVIDER) is not None,
        # Longest first: a value that contains another is masked whole.
        secrets=tuple(sorted(secrets, key=len, reverse=True)),
    )
