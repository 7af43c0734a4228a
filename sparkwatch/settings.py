"""Typed settings, read once at the edge: keyword overrides > env vars > Spark conf > defaults.

Every setting has an env var ``SPARKWATCH_<NAME>`` and a Spark conf key ``spark.sparkwatch.<key>``;
the README's configuration table is generated from :data:`LISTENER_FIELDS`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sparkwatch.redact import redact_token, redact_url

DEFAULT_HISTORY_URL = "sqlite:///sparkwatch.db"
DEFAULT_METRICS_PORT = 9750
OFF_WORDS = {"", "off", "none", "false", "0", "disabled"}
METRICS_PROFILES = ("default", "full")
"""Names of the metric profiles (sparkwatch/metrics/profiles.py defines what each exports)."""


class SettingsError(ValueError):
    """A setting with a bad value; the message names the setting and where it came from."""


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    enabled: bool = True
    mode: str = "auto"
    metrics_enabled: bool = True
    metrics_address: str = "0.0.0.0"  # nosec B104 - Prometheus scrapes the driver
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_port_fallback: bool = False
    metrics_profile: str = "default"
    metrics_allow: tuple[str, ...] | None = None
    metrics_deny: tuple[str, ...] | None = None
    metrics_batch_buckets: tuple[float, ...] | None = None
    metrics_phase_buckets: tuple[float, ...] | None = None
    history_url: str | None = DEFAULT_HISTORY_URL
    history_migrate: bool = True
    history_batch_size: int = 500
    history_flush_seconds: float = 1.0
    history_queue_capacity: int = 10_000
    history_rollup_seconds: float = 60.0
    history_lost_after_seconds: float = 7 * 86_400.0
    queue_capacity: int = 10_000
    terminated_grace_seconds: float = 300.0
    app_name: str | None = None
    push_url: str | None = None
    push_token: str | None = field(default=None, repr=False)
    push_batch_size: int = 500
    push_flush_seconds: float = 1.0
    push_queue_capacity: int = 10_000
    push_timeout_seconds: float = 10.0
    push_retry_max_seconds: float = 30.0
    push_spool_dir: str | None = None
    push_spool_max_bytes: int = 256 << 20
    listener_bus_sample_seconds: float = 10.0
    otlp: bool = False


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    conf_key: str
    parse: Callable[[str], Any]
    help: str

    @property
    def env(self) -> str:
        return "SPARKWATCH_" + self.name.upper()


def _bool(raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true/false")


def _port(raw: str) -> int:
    port = int(raw)
    if not 0 <= port <= 65535:
        raise ValueError("expected a port number 0-65535")
    return port


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("expected a positive integer")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("expected a positive number")
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if not value >= 0:
        raise ValueError("expected a number >= 0")
    return value


def _mode(raw: str) -> str:
    if raw not in ("auto", "jvm", "public"):
        raise ValueError("expected auto, jvm or public")
    return raw


def metrics_profile(raw: str) -> str:
    if raw.strip() not in METRICS_PROFILES:
        raise ValueError(f"expected one of {', '.join(METRICS_PROFILES)}")
    return raw.strip()


def regex_list(raw: str) -> tuple[str, ...] | None:
    """Comma-separated regexes (no regex here needs a comma); empty: none."""
    patterns = tuple(p.strip() for p in raw.split(",") if p.strip())
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from None
    return patterns or None


def buckets(raw: str) -> tuple[float, ...] | None:
    """Comma-separated upper bounds in seconds, increasing (+Inf is always added); empty: the
    catalogue's."""
    try:
        bounds = tuple(float(b) for b in raw.split(",") if b.strip())
    except ValueError:
        raise ValueError("expected increasing numbers of seconds, comma-separated") from None
    if any(not math.isfinite(b) for b in bounds) or list(bounds) != sorted(set(bounds)):
        raise ValueError("expected increasing finite numbers of seconds, comma-separated")
    return bounds or None


def _optional_url(raw: str) -> str | None:
    return None if raw.strip().lower() in OFF_WORDS else raw.strip()


def _text(raw: str) -> str | None:
    return raw or None


LISTENER_FIELDS: tuple[Field, ...] = (
    Field("enabled", "enabled", _bool, "Attach at all (false makes attach() a no-op)."),
    Field(
        "mode",
        "mode",
        _mode,
        "How events are received: jvm (raw JVM events, classic mode), public (PySpark's "
        "listener API, Spark Connect), auto (jvm when the JVM is reachable).",
    ),
    Field("metrics_enabled", "metrics.enabled", _bool, "Serve Prometheus /metrics in the driver."),
    Field("metrics_address", "metrics.address", str, "Address the /metrics endpoint binds."),
    Field("metrics_port", "metrics.port", _port, "Port of /metrics (0 picks a free port)."),
    Field(
        "metrics_port_fallback",
        "metrics.portFallback",
        _bool,
        "When the metrics port is taken, serve /metrics on a free port instead of not at all "
        "(either way attach() warns once and the app runs on).",
    ),
    Field(
        "metrics_profile",
        "metrics.profile",
        metrics_profile,
        "Which metric families /metrics exports: default (what the dashboards and alert rules "
        "read, about 57 series per query with 4 stateful operators) or full (the whole catalogue, "
        "about 340); see docs/metrics.md.",
    ),
    Field(
        "metrics_allow",
        "metrics.allow",
        regex_list,
        "Metric-name regexes (comma-separated, whole name) exported on top of the profile, e.g. "
        "spark_streaming_state_rocksdb_.*",
    ),
    Field(
        "metrics_deny",
        "metrics.deny",
        regex_list,
        "Metric-name regexes (comma-separated, whole name) never exported; deny wins over allow.",
    ),
    Field(
        "metrics_batch_buckets",
        "metrics.batchBuckets",
        buckets,
        "Upper bounds (seconds, comma-separated) of the batch duration histogram (unset: "
        "0.05 ... 600, 13 buckets).",
    ),
    Field(
        "metrics_phase_buckets",
        "metrics.phaseBuckets",
        buckets,
        "Upper bounds (seconds, comma-separated) of the phase duration histogram (unset: "
        "0.01 ... 120, 7 buckets).",
    ),
    Field(
        "history_url",
        "history.url",
        _optional_url,
        "SQLAlchemy URL of the SQL history (sqlite:///file.db, postgresql+psycopg://...); "
        "'off' disables it.",
    ),
    Field(
        "history_migrate",
        "history.migrate",
        _bool,
        "Upgrade the history schema to the latest migration on attach (from the writer thread).",
    ),
    Field("history_batch_size", "history.batchSize", _positive_int, "Events per history write."),
    Field(
        "history_flush_seconds",
        "history.flushSeconds",
        _positive_float,
        "Longest time an event waits before it is written.",
    ),
    Field(
        "history_queue_capacity",
        "history.queueCapacity",
        _positive_int,
        "Events buffered for the history writer; beyond it new events are dropped and counted.",
    ),
    Field(
        "history_rollup_seconds",
        "history.rollupSeconds",
        _non_negative_float,
        "How often the history writer recomputes the recent minute/hour rollups the History "
        "dashboard reads (once per interval across drivers and collectors); 0 turns it off.",
    ),
    Field(
        "history_lost_after_seconds",
        "history.lostAfterSeconds",
        _positive_float,
        "A run with no event for this long is ended as lost (its driver died without saying "
        "so; the collector's stall horizon, --retention-days, by default); checked on the "
        "rollups interval. A run that speaks again is running again.",
    ),
    Field(
        "queue_capacity",
        "queueCapacity",
        _positive_int,
        "Events buffered between Spark's callback thread and the listener's worker.",
    ),
    Field(
        "terminated_grace_seconds",
        "terminatedGraceSeconds",
        _positive_float,
        "How long a terminated query's series stay in /metrics.",
    ),
    Field("app_name", "appName", _text, "Override the app name label (default: spark.app.name)."),
    Field(
        "push_url",
        "push.url",
        _optional_url,
        "Collector ingest URL to push events to (http://collector:9751/api/v1/events); unset "
        "or 'off': no push.",
    ),
    Field(
        "push_token",
        "push.token",
        _text,
        "Bearer token for the collector (prefer the env var: Spark conf shows in the Spark UI).",
    ),
    Field("push_batch_size", "push.batchSize", _positive_int, "Events per push request."),
    Field(
        "push_flush_seconds",
        "push.flushSeconds",
        _positive_float,
        "Longest time an event waits before it is pushed.",
    ),
    Field(
        "push_queue_capacity",
        "push.queueCapacity",
        _positive_int,
        "Events buffered in memory for the push; beyond it the oldest are dropped and counted.",
    ),
    Field(
        "push_timeout_seconds",
        "push.timeoutSeconds",
        _positive_float,
        "Timeout to connect and for each read of a push request (a collector that never answers); "
        "a failed push is retried with backoff.",
    ),
    Field(
        "push_retry_max_seconds",
        "push.retryMaxSeconds",
        _positive_float,
        "Longest wait between push retries (backoff doubles from 0.5 s up to it, with jitter); "
        "also caps the wait a 429 or 503 asks for with Retry-After.",
    ),
    Field(
        "push_spool_dir",
        "push.spoolDir",
        _text,
        "Directory of a disk spool for events the collector could not take yet (one per "
        "app); unset: memory only.",
    ),
    Field(
        "push_spool_max_bytes",
        "push.spoolMaxBytes",
        _positive_int,
        "Bound of the push spool; beyond it new events are dropped and counted.",
    ),
    Field(
        "listener_bus_sample_seconds",
        "listenerBus.sampleSeconds",
        _non_negative_float,
        "How often Spark's listener bus (events dropped per queue, queue sizes) is sampled for "
        "the spark_streaming_listener_bus_* series (classic mode); 0 turns it off.",
    ),
    Field(
        "otlp",
        "otlp",
        _bool,
        "Export the metrics over OTLP too (the otlp extra: pip install 'sparkwatch[otlp]'), "
        "configured by the standard OTEL_EXPORTER_OTLP_* variables (endpoint, protocol, headers), "
        "OTEL_RESOURCE_ATTRIBUTES and OTEL_METRIC_EXPORT_INTERVAL; see docs/otlp.md.",
    ),
)


def _defaults() -> ListenerSettings:
    return ListenerSettings()


def load_listener_settings(
    env: Mapping[str, str] | None = None,
    spark_conf: Mapping[str, str] | None = None,
    **overrides: Any,
) -> ListenerSettings:
    """Resolve settings; a bad value raises :class:`SettingsError` naming the setting and source."""
    known = {f.name for f in fields(ListenerSettings)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise SettingsError(
            f"unknown sparkwatch setting(s): {', '.join(unknown)} "
            f"(known: {', '.join(sorted(known))})"
        )
    values: dict[str, Any] = {}
    for f in LISTENER_FIELDS:
        raw, origin = _lookup(f, env or {}, spark_conf or {})
        if raw is None:
            continue
        try:
            values[f.name] = f.parse(raw)
        except ValueError as exc:
            raise SettingsError(f"{origin}={_shown(f.name, raw)}: {exc}") from None
    by_name = {f.name: f for f in LISTENER_FIELDS}
    for name, value in overrides.items():
        # Strings from code go through the same parser as env/conf ("off", "9750", ...).
        if isinstance(value, str):
            try:
                value = by_name[name].parse(value)
            except ValueError as exc:
                raise SettingsError(f"{name}={_shown(name, value)}: {exc}") from None
        values[name] = value
    return replace(_defaults(), **values)


def _shown(name: str, raw: str) -> str:
    """A bad value as an error shows it: never a token, a URL without its secrets."""
    if name == "push_token":
        return redact_token(raw)
    return redact_url(raw) if name.endswith("_url") else repr(raw)


def _lookup(f: Field, env: Mapping[str, str], conf: Mapping[str, str]) -> tuple[str | None, str]:
    if f.env in env:
        return env[f.env], f.env
    key = "spark.sparkwatch." + f.conf_key
    if key in conf:
        return conf[key], key
    return None, ""


def render_settings_table() -> str:
    """The README's configuration table (a test keeps the README equal to it)."""
    defaults = ListenerSettings()
    lines = [
        "| env var | Spark conf | default | what it does |",
        "|---|---|---|---|",
    ]
    for f in LISTENER_FIELDS:
        default = getattr(defaults, f.name)
        shown = (
            "(unset)"
            if default is None
            else str(default).lower()
            if isinstance(default, bool)
            else default
        )
        lines.append(f"| `{f.env}` | `spark.sparkwatch.{f.conf_key}` | `{shown}` | {f.help} |")
    return "\n".join(lines)
