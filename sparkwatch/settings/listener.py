"""The listener's typed settings, read once at attach: keyword overrides > env vars > Spark conf >
defaults.

Every setting has an env var ``SPARKWATCH_<NAME>`` and a Spark conf key ``spark.sparkwatch.<key>``;
the README's configuration table is generated from :data:`LISTENER_FIELDS`.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sparkwatch.settings.parsers import (
    boolean,
    buckets,
    interval_or_off,
    listen_host,
    metrics_profile,
    optional_url,
    port,
    positive_float,
    positive_int,
    regex_list,
    secret,
    text,
)
from sparkwatch.settings.spec import Setting, SettingsError, conf_source, env_source, resolve

DEFAULT_HISTORY_URL = "sqlite:///sparkwatch.db"
DEFAULT_METRICS_PORT = 9750
CONF_PREFIX = "spark.sparkwatch."


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


def _metrics_address(raw: str) -> str:
    """:func:`listen_host`, and a name the resolver can be asked for: a control character, a
    space, a label past 63 characters or bytes that are not UTF-8 (``os.environb``) made the bind
    fail with a UnicodeError, not an OSError, which ended the whole attach with a message naming
    no setting (``sparkwatch.attach()`` raised it into the app)."""
    address = listen_host(raw)
    if any(not char.isprintable() or char.isspace() for char in address):
        raise ValueError("expected an address or host name, without spaces or control characters")
    try:
        if len(address.encode("idna")) > 253:
            raise UnicodeError("too long")
    except UnicodeError:
        raise ValueError("not an address or host name (too long, or characters no host name "
                         "has)") from None
    return address


def _push_url(raw: str) -> str | None:
    """:func:`optional_url`, refused when it can never be pushed to, as a history URL that can
    never work is: another scheme (``file://``, ``unix://``), no host, a port that is not a
    number, spaces, control characters or bytes that are not UTF-8. Taken, it left the push
    sink retrying for ever (a warning every few minutes) while the events piled up."""
    url = optional_url(raw)
    if url is None:
        return None
    if any(not char.isprintable() or char.isspace() for char in url):
        raise ValueError("expected an http:// or https:// URL, without spaces or control "
                         "characters")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        raise ValueError("not a valid URL: expected http://host:port/api/v1/events") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an http:// or https:// URL with a host "
                         "(http://collector:9751/api/v1/events)")
    # The host may be a name in any script (IDNA); the rest goes on the wire as it is, where
    # http.client refuses any other character than ASCII, at every attempt, for ever.
    rest = (parts.path, parts.query, parts.fragment, parts.username or "", parts.password or "")
    if not all(part.isascii() for part in rest):
        raise ValueError("expected a URL whose path, query and user are ASCII (percent-encode "
                         "the rest: /%C3%A9vents)")
    return url


def _mode(raw: str) -> str:
    if raw not in ("auto", "jvm", "public"):
        raise ValueError("expected auto, jvm or public")
    return raw


def _field(name: str, conf_key: str, parse: Callable[[str], Any], help: str,
          secret: bool = False) -> Setting:
    """A listener setting: env var ``SPARKWATCH_<NAME>``, Spark conf ``spark.sparkwatch.<key>``."""
    return Setting(name, parse, help, env="SPARKWATCH_" + name.upper(),
                   conf_key=CONF_PREFIX + conf_key, secret=secret)


LISTENER_FIELDS: tuple[Setting, ...] = (
    _field("enabled", "enabled", boolean, "Attach at all (false makes attach() a no-op)."),
    _field(
        "mode",
        "mode",
        _mode,
        "How events are received: jvm (raw JVM events, classic mode), public (PySpark's "
        "listener API, Spark Connect), auto (jvm when the JVM is reachable).",
    ),
    _field("metrics_enabled", "metrics.enabled", boolean,
           "Serve Prometheus /metrics in the driver."),
    _field("metrics_address", "metrics.address", _metrics_address,
           "Address the /metrics endpoint binds."),
    _field("metrics_port", "metrics.port", port, "Port of /metrics (0 picks a free port)."),
    _field(
        "metrics_port_fallback",
        "metrics.portFallback",
        boolean,
        "When the metrics port is taken, serve /metrics on a free port instead of not at all "
        "(either way attach() warns once and the app runs on).",
    ),
    _field(
        "metrics_profile",
        "metrics.profile",
        metrics_profile,
        "Which metric families /metrics exports: default (what the dashboards and alert rules "
        "read, about 57 series per query with 4 stateful operators) or full (the whole catalogue, "
        "about 340); see docs/metrics.md.",
    ),
    _field(
        "metrics_allow",
        "metrics.allow",
        regex_list,
        "Metric-name regexes (comma-separated, whole name) exported on top of the profile, e.g. "
        "spark_streaming_state_rocksdb_.*",
    ),
    _field(
        "metrics_deny",
        "metrics.deny",
        regex_list,
        "Metric-name regexes (comma-separated, whole name) never exported; deny wins over allow.",
    ),
    _field(
        "metrics_batch_buckets",
        "metrics.batchBuckets",
        buckets,
        "Upper bounds (seconds, comma-separated) of the batch duration histogram (unset: "
        "0.05 ... 600, 13 buckets).",
    ),
    _field(
        "metrics_phase_buckets",
        "metrics.phaseBuckets",
        buckets,
        "Upper bounds (seconds, comma-separated) of the phase duration histogram (unset: "
        "0.01 ... 120, 7 buckets).",
    ),
    _field(
        "history_url",
        "history.url",
        optional_url,
        "SQLAlchemy URL of the SQL history (sqlite:///file.db, postgresql+psycopg://...); "
        "'off' disables it. One that can never work (not a URL, another database, a driver not "
        "installed or an asyncio one, an in-memory SQLite or one in a folder that does not "
        "exist) makes attach() raise SettingsError; a database that is "
        "down does not (the writer retries).",
    ),
    _field(
        "history_migrate",
        "history.migrate",
        boolean,
        "Upgrade the history schema to the latest migration on attach (from the writer thread).",
    ),
    _field("history_batch_size", "history.batchSize", positive_int, "Events per history write."),
    _field(
        "history_flush_seconds",
        "history.flushSeconds",
        positive_float,
        "Longest time an event waits before it is written.",
    ),
    _field(
        "history_queue_capacity",
        "history.queueCapacity",
        positive_int,
        "Events buffered for the history writer; beyond it new events are dropped and counted.",
    ),
    _field(
        "history_rollup_seconds",
        "history.rollupSeconds",
        interval_or_off,
        "How often the history writer recomputes the recent minute/hour rollups the History "
        "dashboard reads (once per interval across drivers and collectors); 0 turns it off.",
    ),
    _field(
        "history_lost_after_seconds",
        "history.lostAfterSeconds",
        positive_float,
        "A run with no event for this long is ended as lost (its driver died without saying "
        "so; the collector's stall horizon, --retention-days, by default); checked on the "
        "rollups interval. A run that speaks again is running again.",
    ),
    _field(
        "queue_capacity",
        "queueCapacity",
        positive_int,
        "Events buffered between Spark's callback thread and the listener's worker.",
    ),
    _field(
        "terminated_grace_seconds",
        "terminatedGraceSeconds",
        positive_float,
        "How long a terminated query's series stay in /metrics.",
    ),
    _field("app_name", "appName", text, "Override the app name label (default: spark.app.name)."),
    _field(
        "push_url",
        "push.url",
        _push_url,
        "Collector ingest URL to push events to (http://collector:9751/api/v1/events); unset "
        "or 'off': no push.",
    ),
    _field(
        "push_token",
        "push.token",
        secret,
        "Bearer token for the collector (prefer the env var: Spark conf shows in the Spark UI).",
        secret=True,
    ),
    _field("push_batch_size", "push.batchSize", positive_int, "Events per push request."),
    _field(
        "push_flush_seconds",
        "push.flushSeconds",
        positive_float,
        "Longest time an event waits before it is pushed.",
    ),
    _field(
        "push_queue_capacity",
        "push.queueCapacity",
        positive_int,
        "Events buffered in memory for the push; beyond it the oldest are dropped and counted.",
    ),
    _field(
        "push_timeout_seconds",
        "push.timeoutSeconds",
        positive_float,
        "Seconds for a whole push request, connecting to the end of the answer (a collector that "
        "never answers, or drips its answer); a failed push is retried with backoff.",
    ),
    _field(
        "push_retry_max_seconds",
        "push.retryMaxSeconds",
        positive_float,
        "Longest wait between push retries (backoff doubles from 0.5 s up to it, with jitter); "
        "also caps the wait a 429 or 503 asks for with Retry-After.",
    ),
    _field(
        "push_spool_dir",
        "push.spoolDir",
        text,
        "Directory of a disk spool for events the collector could not take yet (one per "
        "app); unset: memory only.",
    ),
    _field(
        "push_spool_max_bytes",
        "push.spoolMaxBytes",
        positive_int,
        "Bound of the push spool; beyond it new events are dropped and counted.",
    ),
    _field(
        "listener_bus_sample_seconds",
        "listenerBus.sampleSeconds",
        interval_or_off,
        "How often Spark's listener bus (events dropped per queue, queue sizes) is sampled for "
        "the spark_streaming_listener_bus_* series (classic mode); 0 turns it off, else at least "
        "0.1 s.",
    ),
    _field(
        "otlp",
        "otlp",
        boolean,
        "Export the metrics over OTLP too (the otlp extra: pip install 'sparkwatch[otlp]'), "
        "configured by the standard OTEL_EXPORTER_OTLP_* variables (endpoint, protocol, headers), "
        "OTEL_RESOURCE_ATTRIBUTES and OTEL_METRIC_EXPORT_INTERVAL; see docs/otlp.md.",
    ),
)


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
    values = resolve(LISTENER_FIELDS, (env_source(env or {}), conf_source(spark_conf or {})))
    for name, value in overrides.items():
        values[name] = _override(name, value)
    return replace(ListenerSettings(), **values)


def given_at(
    name: str,
    env: Mapping[str, str] | None = None,
    spark_conf: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """Where setting ``name``'s value came from, as its errors name it: the keyword override,
    else its env var, else its Spark conf key (the order :func:`load_listener_settings` reads
    them in); both names when none gave it."""
    setting = BY_NAME[name]
    if overrides and name in overrides:
        return name
    if env and setting.env in env:
        return setting.env
    if spark_conf and setting.conf_key in spark_conf:
        return str(setting.conf_key)
    return f"{setting.env} or {setting.conf_key}"


def _override(name: str, value: Any) -> Any:
    """A value given in code goes through the same parser as env/conf: a string as it is
    ("off", "9750"), a number or a flag as its text. Unchecked, ``metrics_port=70000`` reached
    bind() (an OverflowError in the app) and ``queue_capacity=0`` made the queue unbounded."""
    if isinstance(value, bool):
        return BY_NAME[name].parsed("true" if value else "false", name)
    if isinstance(value, str | int | float):
        return BY_NAME[name].parsed(str(value) if not isinstance(value, str) else value, name)
    return value  # None (unset) or a structured value (buckets as a tuple)


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
        lines.append(f"| `{f.env}` | `{f.conf_key}` | `{shown}` | {f.help} |")
    return "\n".join(lines)


BY_NAME = {f.name: f for f in LISTENER_FIELDS}
assert set(BY_NAME) == {f.name for f in fields(ListenerSettings)}
