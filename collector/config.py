"""The collector's typed settings, read once at the edge: CLI flags > env vars > defaults.

Each setting has an env var ``SPARKWATCH_COLLECTOR_<NAME>`` and a flag ``--<name-with-dashes>``,
except secrets: ingest tokens and the read token come only from the environment or a file, never
from the command line (which any local user can read in ``ps``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from sparkwatch.model.tenant import DEFAULT_TENANT
from sparkwatch.redact import redact_url
from sparkwatch.settings import (
    DEFAULT_HISTORY_URL,
    OFF_WORDS,
    SettingsError,
    _bool,
    _port,
    _positive_float,
    _positive_int,
    buckets,
    metrics_profile,
    regex_list,
)

ENV_PREFIX = "SPARKWATCH_COLLECTOR_"
DEFAULT_PORT = 9751
ANY_APP = "*"
TENANT_SEPARATOR = "/"


@dataclass(frozen=True, slots=True)
class CollectorSettings:
    host: str = "0.0.0.0"  # nosec B104 - a collector serves the network (docs/security.md)
    port: int = DEFAULT_PORT
    history_url: str | None = DEFAULT_HISTORY_URL
    history_migrate: bool = True
    spool_dir: Path = Path("sparkwatch-spool")
    spool_max_bytes: int = 1 << 30
    quarantine_max_bytes: int = 256 << 20
    spool_fsync: bool = True
    write_batch_size: int = 1000
    tokens: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """(scope, ingest token): scope is ``TENANT/APP`` or ``APP`` (tenant ``default``), APP may be
    ``*`` for any app; an app may have several tokens (rotation). See :func:`split_scope`."""
    read_token: str | None = field(default=None, repr=False)
    """the admin read token: the read API of every tenant, and /metrics"""
    tenant_read_tokens: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """(tenant, read token): the read API of that tenant only"""
    scrape_token: str | None = field(default=None, repr=False)
    no_auth: bool = False
    header_timeout_seconds: float = 10.0
    body_timeout_seconds: float = 30.0
    max_connections: int = 1000
    max_body_bytes: int = 16 << 20
    max_inflight_body_bytes: int | None = None
    """None: twice max_body_bytes (see :func:`inflight_bound`)"""
    max_events_per_request: int = 5000
    max_apps: int = 100
    max_queries_per_app: int = 200
    max_queries: int = 1000
    max_operators_per_query: int = 64
    max_custom_metric_keys: int = 128
    max_label_value_chars: int = 256
    max_events_per_second: float = 20000.0
    max_bytes_per_second: float = float(64 << 20)
    rate_burst_seconds: float = 5.0
    metrics_profile: str = "default"
    metrics_allow: tuple[str, ...] | None = None
    metrics_deny: tuple[str, ...] | None = None
    metrics_batch_buckets: tuple[float, ...] | None = None
    metrics_phase_buckets: tuple[float, ...] | None = None
    terminated_grace_seconds: float = 300.0
    stale_seconds: float = 900.0
    jobs_enabled: bool = True
    retention_days: float = 7.0
    rollup_retention_days: float = 90.0
    retention_interval_seconds: float = 3600.0
    rollup_interval_seconds: float = 60.0
    rollup_lookback_seconds: float = 7200.0
    stall_intervals: int = 5
    stall_min_seconds: float = 60.0
    stall_check_seconds: float = 30.0
    evict_interval_seconds: float = 30.0
    worker_deadline_seconds: float = 120.0
    otlp: bool = False
    replica: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    parse: Callable[[str], Any]
    help: str
    secret: bool = False
    """Secrets have no flag (env or file only) and are never shown."""

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _optional_url(raw: str) -> str | None:
    return None if raw.strip().lower() in OFF_WORDS else raw.strip()


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if value < 0:
        raise ValueError("expected a number >= 0")
    return value


def split_scope(scope: str) -> tuple[str, str]:
    """(tenant, app) of a token's scope: ``TENANT/APP``, or ``APP`` in tenant ``default``."""
    tenant, sep, app = scope.partition(TENANT_SEPARATOR)
    return (tenant.strip(), app.strip()) if sep else (DEFAULT_TENANT, scope.strip())


def _check_scope(scope: str) -> None:
    tenant, app = split_scope(scope)
    if not tenant or not app or TENANT_SEPARATOR in app:
        raise ValueError("expected TENANT/APP=TOKEN or APP=TOKEN (a tenant or app is empty, or "
                         "has a second '/')")
    if len(tenant) > MAX_TENANT_CHARS:
        raise ValueError(f"a tenant name is longer than {MAX_TENANT_CHARS} characters")


MAX_TENANT_CHARS = 64


def parse_tokens(raw: str) -> tuple[tuple[str, str], ...]:
    """``app=token,tenant/app2=token2`` (or one pair per line); ``*=token`` accepts any app
    name; ``TENANT/`` puts the token in a tenant (else ``default``); an app may be listed with
    several tokens (to rotate them)."""
    tokens: dict[str, str] = {}  # token -> app
    for item in raw.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        app, sep, token = item.partition("=")
        if not sep or not app.strip() or not token.strip():
            # Never echo the item: it may be a token with the app name forgotten.
            raise ValueError("expected APP=TOKEN pairs separated by commas or newlines")
        _check_scope(app)
        if tokens.get(token.strip(), app.strip()) != app.strip():
            raise ValueError(f"one token is given to two apps ({tokens[token.strip()]!r} and "
                             f"{app.strip()!r})")
        tokens[token.strip()] = app.strip()
    return tuple((app, token) for token, app in tokens.items())


def _secret(raw: str) -> str | None:
    return raw.strip() or None


def parse_tenant_tokens(raw: str) -> tuple[tuple[str, str], ...]:
    """``tenant=token,...`` (or one pair per line): read tokens, each scoped to one tenant."""
    pairs: dict[str, str] = {}  # token -> tenant
    for item in raw.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        tenant, sep, token = (part.strip() for part in item.partition("="))
        if not sep or not tenant or not token or TENANT_SEPARATOR in tenant:
            raise ValueError("expected TENANT=TOKEN pairs separated by commas or newlines")
        if len(tenant) > MAX_TENANT_CHARS:
            raise ValueError(f"a tenant name is longer than {MAX_TENANT_CHARS} characters")
        if pairs.get(token, tenant) != tenant:
            raise ValueError("one read token is given to two tenants")
        pairs[token] = tenant
    return tuple((tenant, token) for token, tenant in pairs.items())


SETTINGS: tuple[Setting, ...] = (
    Setting("host", str, "address to listen on"),
    Setting("port", _port, "port to listen on"),
    Setting("history_url", _optional_url,
            "SQLAlchemy URL of the history (postgresql+psycopg://... in production); 'off' "
            "keeps only /metrics"),
    Setting("history_migrate", _bool, "upgrade the history schema on the first write"),
    Setting("spool_dir", Path, "directory of the write-ahead spool (accepted events not yet "
            "in the database); must survive restarts"),
    Setting("spool_max_bytes", _positive_int,
            "spool bound; when full, ingest answers 503 and clients keep their events"),
    Setting("quarantine_max_bytes", _positive_int,
            "bound of the quarantine file beside the spool (events the history refused); when "
            "full, refused events stay in the spool and are retried"),
    Setting("spool_fsync", _bool, "fsync each accepted request before answering (durable "
            "across power loss; off: across process crashes only)"),
    Setting("write_batch_size", _positive_int, "events per history transaction"),
    Setting("tokens", parse_tokens, "ingest tokens, [TENANT/]APP=TOKEN,... ('*=TOKEN' for any "
            "app; without TENANT/ the token's tenant is 'default')", secret=True),
    Setting("read_token", _secret, "admin read token: the read API of every tenant, and /metrics "
            "(default: reads are open unless tenant read tokens are set)", secret=True),
    Setting("tenant_read_tokens", parse_tenant_tokens,
            "read tokens scoped to one tenant each, TENANT=TOKEN,...: the read API answers "
            "with that tenant's data only", secret=True),
    Setting("scrape_token", _secret, "token for /metrics only (the admin read token is "
            "accepted too; without either /metrics is open)", secret=True),
    Setting("no_auth", _bool, "accept ingest without a token (development only)"),
    Setting("header_timeout_seconds", _positive_float,
            "a connection that has not sent a request's headers this long after opening (or "
            "after the request's first byte) is closed (slow-loris)"),
    Setting("body_timeout_seconds", _positive_float,
            "an ingest body not received whole this long after its headers is answered 408 and "
            "the connection closed"),
    Setting("max_connections", _positive_int,
            "most concurrent connections (and requests); beyond it new requests get 503"),
    Setting("max_body_bytes", _positive_int, "largest request body, before and after gzip"),
    Setting("max_inflight_body_bytes", _positive_int,
            "request bytes decoded at once, bodies and what they inflate to (each costs about 4 "
            "times its size in memory); past it a request waits up to 5 s, then gets 503 "
            "(default: twice --max-body-bytes)"),
    Setting("max_events_per_request", _positive_int, "most events in one ingest request"),
    Setting("max_apps", _positive_int, "quota: most distinct apps per tenant in /metrics"),
    Setting("max_queries_per_app", _positive_int, "quota: most distinct queries per app"),
    Setting("max_queries", _positive_int, "quota: most distinct queries per tenant"),
    Setting("max_operators_per_query", _positive_int, "quota: most state operators per query"),
    Setting("max_custom_metric_keys", _positive_int,
            "quota: most custom metric keys of one state operator in one event"),
    Setting("max_label_value_chars", _positive_int,
            "quota: longest label value (app name, query name, operator name, source or sink "
            "description, metric key) in an event"),
    Setting("max_events_per_second", _positive_float,
            "quota: events per second per tenant (sustained; 429 with Retry-After beyond)"),
    Setting("max_bytes_per_second", _positive_float,
            "quota: request bytes per second per tenant (sustained; 429 with Retry-After beyond)"),
    Setting("rate_burst_seconds", _positive_float,
            "a tenant may send this many seconds of its rate quotas at once"),
    Setting("metrics_profile", metrics_profile,
            "metric families /metrics exports: default (what the dashboards and alert rules "
            "read, about 57 series per query with 4 stateful operators) or full (the whole "
            "catalogue, about 340); see docs/metrics.md"),
    Setting("metrics_allow", regex_list,
            "metric-name regexes (comma-separated, whole name) exported on top of the profile"),
    Setting("metrics_deny", regex_list,
            "metric-name regexes (comma-separated, whole name) never exported; deny wins"),
    Setting("metrics_batch_buckets", buckets,
            "upper bounds (seconds, comma-separated) of the batch duration histogram"),
    Setting("metrics_phase_buckets", buckets,
            "upper bounds (seconds, comma-separated) of the phase duration histogram"),
    Setting("terminated_grace_seconds", _positive_float,
            "how long a terminated query's series stay in /metrics"),
    Setting("stale_seconds", _positive_float,
            "series of a query with no event for this long are evicted"),
    Setting("jobs_enabled", _bool, "run the scheduled jobs (retention, rollups, stalls)"),
    Setting("retention_days", _positive_float, "days raw per-batch rows are kept"),
    Setting("rollup_retention_days", _positive_float, "days rollups and runs are kept"),
    Setting("retention_interval_seconds", _positive_float, "how often retention runs"),
    Setting("rollup_interval_seconds", _positive_float, "how often rollups are recomputed"),
    Setting("rollup_lookback_seconds", _positive_float,
            "rollups recompute the buckets of this recent window (late events land in it)"),
    Setting("stall_intervals", _positive_int,
            "a run is stalled after this many trigger intervals without progress or idle"),
    Setting("stall_min_seconds", _non_negative_float,
            "a run is never stalled before this many seconds without events"),
    Setting("stall_check_seconds", _positive_float, "how often stall detection runs"),
    Setting("evict_interval_seconds", _positive_float, "how often stale series are evicted"),
    Setting("worker_deadline_seconds", _positive_float,
            "a background worker (the history pump) that shows no progress for this long is "
            "reported hung in /readyz; longer than the slowest history write"),
    Setting("otlp", _bool,
            "export the catalogue over OTLP too (the otlp extra), configured by the standard "
            "OTEL_EXPORTER_OTLP_* variables, OTEL_RESOURCE_ATTRIBUTES and "
            "OTEL_METRIC_EXPORT_INTERVAL (docs/otlp.md)"),
    Setting("replica", str, "name of this replica in job_runs (default: host-pid)"),
)
BY_NAME = {s.name: s for s in SETTINGS}
assert set(BY_NAME) == {f.name for f in fields(CollectorSettings)}


def is_bool(setting: Setting) -> bool:
    return setting.parse is _bool


def render_settings_table() -> str:
    """docs/collector.md's settings table, from :data:`SETTINGS` (a test keeps the doc equal)."""
    # Defaults computed at start (the replica's host-pid) are said by the help, not shown.
    defaults = {f.name: f.default for f in fields(CollectorSettings) if f.default is not MISSING}
    lines = ["| flag | environment variable | default | what |", "|---|---|---|---|"]
    for s in SETTINGS:
        flag = "(secret: no flag)" if s.secret else f"`{_flag_form(s)}`"
        default = "–" if s.secret else _shown_default(defaults.get(s.name))
        lines.append(f"| {flag} | `{s.env}` | {default} | {s.help} |")
    return "\n".join(lines)


def _flag_form(s: Setting) -> str:
    if is_bool(s) and not s.name.startswith("no_"):
        return f"{s.flag}/--no-{s.flag[2:]}"
    return s.flag if is_bool(s) else f"{s.flag} VALUE"


def _shown_default(value: Any) -> str:
    if value is None or value == ():
        return "–"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        value = ",".join(map(str, value))
    return f"`{value}`"


def load_collector_settings(
    env: Mapping[str, str], flags: Mapping[str, str | None] | None = None,
    tokens_file: Path | None = None,
) -> CollectorSettings:
    """Resolve settings: flags > env > defaults; a bad value names the flag or env var."""
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw, origin = _lookup(setting, env, flags or {})
        if raw is None:
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            shown = "<secret>" if setting.secret else (
                redact_url(raw) if setting.name.endswith("_url") else repr(raw))
            raise SettingsError(f"{origin}={shown}: {exc}") from None
    if tokens_file is not None:
        values["tokens"] = parse_tokens_merged(values.get("tokens", ()),
                                               read_tokens_file(tokens_file))
    settings = replace(CollectorSettings(), **values)
    check(settings)
    return settings


def _lookup(
    setting: Setting, env: Mapping[str, str], flags: Mapping[str, str | None]
) -> tuple[str | None, str]:
    if not setting.secret and flags.get(setting.name) is not None:
        return flags[setting.name], setting.flag
    if setting.env in env:
        return env[setting.env], setting.env
    return None, ""


def parse_tokens_merged(*groups: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    try:
        return parse_tokens(",".join(f"{app}={token}" for group in groups for app, token in group))
    except ValueError as exc:
        raise SettingsError(f"ingest tokens: {exc}") from None


def read_tokens_file(path: Path) -> tuple[tuple[str, str], ...]:
    try:
        return parse_tokens(path.read_text())
    except OSError as exc:
        raise SettingsError(f"--tokens-file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise SettingsError(f"--tokens-file {path}: {exc}") from None


def check(settings: CollectorSettings) -> None:
    """Combinations that cannot work, refused at startup rather than discovered later."""
    if not settings.tokens and not settings.no_auth:
        raise SettingsError(
            f"no ingest tokens: set {BY_NAME['tokens'].env}=APP=TOKEN,... or --tokens-file, "
            f"or {BY_NAME['no_auth'].flag} for an unauthenticated development collector"
        )
    if inflight_bound(settings) < settings.max_body_bytes:
        raise SettingsError(
            f"{BY_NAME['max_inflight_body_bytes'].flag} ({settings.max_inflight_body_bytes}) is "
            f"smaller than {BY_NAME['max_body_bytes'].flag} ({settings.max_body_bytes}): a "
            "request at the body limit could never be decoded"
        )
    if settings.tenant_read_tokens and settings.read_token is None \
            and settings.scrape_token is None:
        raise SettingsError(
            f"{BY_NAME['tenant_read_tokens'].env} is set but neither "
            f"{BY_NAME['read_token'].env} nor {BY_NAME['scrape_token'].env}: /metrics would show "
            "every tenant's series to anyone; set a scrape token (or an admin read token)"
        )
    if settings.rollup_lookback_seconds > settings.retention_days * 86400:
        raise SettingsError(
            "--rollup-lookback-seconds is longer than --retention-days: rollups would be "
            "recomputed from rows retention already deleted"
        )


def inflight_bound(settings: CollectorSettings) -> int:
    """Request bytes decoded at once: the setting, by default room for two requests at the body
    limit (what the memory budget in docs/collector.md is computed from)."""
    return settings.max_inflight_body_bytes or 2 * settings.max_body_bytes
