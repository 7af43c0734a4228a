"""The collector's typed settings, read once at start: CLI flags > env vars > defaults.

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
from sparkwatch.settings.listener import DEFAULT_HISTORY_URL
from sparkwatch.settings.options import metavar
from sparkwatch.settings.parsers import (
    boolean,
    buckets,
    days,
    directory,
    fraction,
    interval,
    listen_host,
    metrics_profile,
    non_negative_float,
    optional_url,
    port,
    positive_float,
    positive_int,
    rate,
    regex_list,
    secret,
)
from sparkwatch.settings.spec import (
    SHOWN_CHARS,
    Setting,
    SettingsError,
    env_source,
    flag_source,
    resolve,
    shown_default,
)
from sparkwatch.summary import cut

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
    spool_tenant_share: float = 0.5
    """the part of spool_max_bytes one tenant's pending records may hold while the ingest tokens
    name more than one tenant (see :func:`spool_share`)"""
    quarantine_max_bytes: int = 256 << 20
    spool_fsync: bool = True
    write_batch_size: int = 1000
    tokens: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """(scope, ingest token): scope is ``TENANT/APP`` or ``APP`` (tenant ``default``), APP may be
    ``*`` for any app; an app may have several tokens (rotation). See
    :func:`~sparkwatch.collector.config.split_scope`."""
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
    read_concurrency: int = 8
    """history reads (the read API's, the console's pages) run at once, on threads of their own
    (see :class:`sparkwatch.collector.reads.ReadSlots`)"""
    read_timeout_seconds: float = 30.0
    read_lock_timeout_seconds: float = 5.0
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


def collector_setting(name: str, parse: Callable[[str], Any], help: str,
                      secret: bool = False) -> Setting:
    """A collector setting: env var ``SPARKWATCH_COLLECTOR_<NAME>``, flag ``--<name-with-dashes>``
    (none for a secret: it comes from the environment or a file only)."""
    return Setting(name, parse, help, env=ENV_PREFIX + name.upper(),
                   flag=None if secret else "--" + name.replace("_", "-"), secret=secret)


def scope_parts(scope: str) -> tuple[str | None, str]:
    """(tenant or None when the scope names none, app) of a token's scope ``[TENANT/]APP``."""
    tenant, sep, app = scope.partition(TENANT_SEPARATOR)
    return (tenant.strip(), app.strip()) if sep else (None, scope.strip())


def _check_scope(scope: str) -> None:
    tenant, app = scope_parts(scope)
    if tenant == "" or not app or TENANT_SEPARATOR in app:
        raise ValueError("expected TENANT/APP=TOKEN or APP=TOKEN (a tenant or app is empty, or "
                         "has a second '/')")
    if tenant is not None and len(tenant) > MAX_TENANT_CHARS:
        raise ValueError(f"a tenant name is longer than {MAX_TENANT_CHARS} characters")


MAX_TENANT_CHARS = 64


def parse_tokens(raw: str) -> tuple[tuple[str, str], ...]:
    """``app=token,tenant/app2=token2`` (or one pair per line); ``*=token`` accepts any app
    name; ``TENANT/`` puts the token in a tenant (else ``default``); an app may be listed with
    several tokens (to rotate them).

    An error names an entry by its position (:func:`_entries`), never by its text: an entry
    written the wrong way round (TOKEN=APP) has its token where the app name goes.

    An entry given again (the same token for the same scope, ``orders`` and ``default/orders``
    alike) is one token, kept as first written."""
    return _one_owner_per_token(_token_entries(raw), _TWO_APPS, _APP_TOKEN, _same_scope)


def _token_entries(raw: str, source: str = "") -> list[_Entry]:
    """The (scope, token, where) of each entry of ``raw``, checked and numbered as written."""
    checked: list[_Entry] = []
    entries = _entries(raw)
    for number, item in enumerate(entries, 1):
        app, sep, token = (part.strip() for part in item.partition("="))
        if not sep or not app or not token:
            raise ValueError("expected APP=TOKEN pairs separated by commas or newlines "
                             f"(entry {number} of {len(entries)} is not)")
        try:
            _check_scope(app)
            _check_sendable(token)
        except ValueError as exc:
            raise ValueError(f"{exc}; entry {number} of {len(entries)}") from None
        checked.append((app, token, (number, source)))
    return checked


def _same_scope(scope: str) -> tuple[str, str]:
    """What a scope means, however written: ``orders`` is ``default/orders`` (and ``a / b`` is
    ``a/b``), as the collector's auth reads it; told apart, one token given in two spellings
    was refused as "given to two apps"."""
    tenant, app = scope_parts(scope)
    return (DEFAULT_TENANT if tenant is None else tenant, app)


_TWO_APPS = "one token is given to two apps"
_APP_TOKEN = "[TENANT/]APP=TOKEN"


_Where = tuple[int, str]
"""Where a token's entry is: its number and what it is an entry of ("" for the one text parsed;
" of SPARKWATCH_COLLECTOR_TOKENS" when two sources are merged)."""
_Entry = tuple[str, str, _Where]
"""(owner, token, where) of one entry."""


def _entries(raw: str) -> list[str]:
    """The entries of ``raw``, separated by commas or newlines, numbered from 1 in errors:
    blank ones and ``#`` comments are not entries (a file's comment lines are not counted)."""
    items = (item.strip() for item in raw.replace("\n", ",").split(","))
    return [item for item in items if item and not item.startswith("#")]


def _one_owner_per_token(entries: list[_Entry], clash: str, form: str,
                         meaning: Callable[[str], object] = str) -> tuple[tuple[str, str], ...]:
    """(owner, token) of each of ``entries`` (owner, token, where), an entry repeated (its owner
    of the same ``meaning``) kept once, as first written; a token given to two owners (apps,
    tenants) raises ValueError saying ``clash`` and naming the two entries by where they are,
    never by their text: either "owner" may be a token, in an entry written the wrong way round
    (``form`` is the right one)."""
    first: dict[str, tuple[str, _Where]] = {}  # token -> (owner, where)
    for owner, token, where in entries:
        earlier, at = first.setdefault(token, (owner, where))
        if meaning(earlier) != meaning(owner):
            raise ValueError(f"{clash}, in {_two(at, where)} (is one written the wrong way "
                             f"round? the form is {form})")
    return tuple((owner, token) for token, (owner, _) in first.items())


def _two(one: _Where, other: _Where) -> str:
    """``entries 1 and 2``, or ``entry 2 of A and entry 1 of B``."""
    if one[1] == other[1]:
        return f"entries {one[0]} and {other[0]}{one[1]}"
    return f"entry {one[0]}{one[1]} and entry {other[0]}{other[1]}"


def _check_sendable(token: str) -> None:
    """As :func:`sparkwatch.settings.parsers.secret` for one token: a token with any other
    character used to be taken, and every request presenting it got a 401 (no client can send
    it in a header)."""
    try:
        secret(token)
    except ValueError:
        raise ValueError("a token holds a space, control or non-ASCII character (tokens are "
                         "visible ASCII only: no HTTP client can send another in a header)"
                         ) from None


def parse_tenant_tokens(raw: str) -> tuple[tuple[str, str], ...]:
    """``tenant=token,...`` (or one pair per line): read tokens, each scoped to one tenant. An
    error names an entry by its position, never by its text (as :func:`parse_tokens`)."""
    checked: list[_Entry] = []
    entries = _entries(raw)
    for number, item in enumerate(entries, 1):
        tenant, sep, token = (part.strip() for part in item.partition("="))
        where = f"entry {number} of {len(entries)}"
        if not sep or not tenant or not token or TENANT_SEPARATOR in tenant:
            raise ValueError(f"expected TENANT=TOKEN pairs separated by commas or newlines "
                             f"({where} is not)")
        if len(tenant) > MAX_TENANT_CHARS:
            raise ValueError(f"a tenant name is longer than {MAX_TENANT_CHARS} characters; "
                             f"{where}")
        try:
            _check_sendable(token)
        except ValueError as exc:
            raise ValueError(f"{exc}; {where}") from None
        checked.append((tenant, token, (number, "")))
    return _one_owner_per_token(checked, "one read token is given to two tenants",
                                "TENANT=TOKEN")


_S = collector_setting  # the table below, one row per setting
SETTINGS: tuple[Setting, ...] = (
    _S("host", listen_host, "address to listen on"),
    _S("port", port, "port to listen on"),
    _S("history_url", optional_url,
       "SQLAlchemy URL of the history (postgresql+psycopg://... in production); 'off' "
       "keeps only /metrics"),
    _S("history_migrate", boolean, "upgrade the history schema on the first write"),
    _S("spool_dir", directory, "directory of the write-ahead spool (accepted events not yet "
       "in the database); must survive restarts"),
    _S("spool_max_bytes", positive_int,
       "spool bound; when full, ingest answers 503 and clients keep their events"),
    _S("spool_tenant_share", fraction,
       "the part of --spool-max-bytes one tenant's events not yet in the history may hold "
       "while the ingest tokens name more than one tenant (one tenant: the whole spool); past "
       "it that tenant's pushes get 503 and the other tenants' are still accepted"),
    _S("quarantine_max_bytes", positive_int,
       "bound of the quarantine file beside the spool (events the history refused); when "
       "full, refused events stay in the spool and are retried"),
    _S("spool_fsync", boolean, "fsync each accepted request before answering (durable "
       "across power loss; off: across process crashes only)"),
    _S("write_batch_size", positive_int, "events per history transaction"),
    _S("tokens", parse_tokens, "ingest tokens, [TENANT/]APP=TOKEN,... ('*=TOKEN' for any "
       "app; without TENANT/ the token's tenant is 'default')", secret=True),
    _S("read_token", secret, "admin read token: the read API of every tenant, and /metrics "
       "(default: reads are open unless tenant read tokens are set)", secret=True),
    _S("tenant_read_tokens", parse_tenant_tokens,
       "read tokens scoped to one tenant each, TENANT=TOKEN,...: the read API answers "
       "with that tenant's data only", secret=True),
    _S("scrape_token", secret, "token for /metrics only (the admin read token is "
       "accepted too; without either /metrics is open)", secret=True),
    _S("no_auth", boolean, "accept ingest without a token (development only)"),
    _S("header_timeout_seconds", positive_float,
       "a connection that has not sent a request's headers this long after opening (or "
       "after the request's first byte) is closed (slow-loris)"),
    _S("body_timeout_seconds", positive_float,
       "an ingest body not received whole this long after its headers is answered 408 and "
       "the connection closed"),
    _S("max_connections", positive_int,
       "most concurrent connections (and requests); beyond it a request takes the place of "
       "the connections waiting longest for their headers, or gets 503 when none waits"),
    _S("max_body_bytes", positive_int, "largest request body, before and after gzip"),
    _S("max_inflight_body_bytes", positive_int,
       "request bytes decoded at once, bodies and what they inflate to (each costs about 4 "
       "times its size in memory); past it a request waits up to 5 s, then gets 503 "
       "(default: twice --max-body-bytes)"),
    _S("read_concurrency", positive_int,
       "history reads (the read API's, the console's pages) run at once, on threads of their "
       "own, apart from ingest's and the probes'; while several read tokens exist one runs at "
       "most half; past it a read waits up to 2 s, then gets 503 with Retry-After"),
    _S("read_timeout_seconds", positive_float,
       "the most one history read statement may run (PostgreSQL's statement_timeout); past "
       "it the read gets 503 with Retry-After"),
    _S("read_lock_timeout_seconds", positive_float,
       "the most a history read waits for a lock (PostgreSQL's lock_timeout, SQLite's busy "
       "timeout; a migration's, a housekeeping job's), at most --read-timeout-seconds; past it "
       "the read gets 503 with Retry-After"),
    _S("max_events_per_request", positive_int, "most events in one ingest request"),
    _S("max_apps", positive_int, "quota: most distinct apps per tenant in /metrics"),
    _S("max_queries_per_app", positive_int, "quota: most distinct queries per app"),
    _S("max_queries", positive_int, "quota: most distinct queries per tenant"),
    _S("max_operators_per_query", positive_int, "quota: most state operators per query"),
    _S("max_custom_metric_keys", positive_int,
       "quota: most custom metric keys of one state operator in one event"),
    _S("max_label_value_chars", positive_int,
       "quota: longest label value (app name, query name, operator name, source or sink "
       "description, metric key) in an event"),
    _S("max_events_per_second", rate,
       "quota: events per second per tenant (sustained; 429 with Retry-After beyond)"),
    _S("max_bytes_per_second", rate,
       "quota: request bytes per second per tenant (sustained; 429 with Retry-After beyond)"),
    _S("rate_burst_seconds", positive_float,
       "a tenant may send this many seconds of its rate quotas at once"),
    _S("metrics_profile", metrics_profile,
       "metric families /metrics exports: default (what the dashboards and alert rules "
       "read, about 57 series per query with 4 stateful operators) or full (the whole "
       "catalogue, about 340); see docs/metrics.md"),
    _S("metrics_allow", regex_list,
       "metric-name regexes (comma-separated, whole name) exported on top of the profile"),
    _S("metrics_deny", regex_list,
       "metric-name regexes (comma-separated, whole name) never exported; deny wins"),
    _S("metrics_batch_buckets", buckets,
       "upper bounds (seconds, comma-separated) of the batch duration histogram"),
    _S("metrics_phase_buckets", buckets,
       "upper bounds (seconds, comma-separated) of the phase duration histogram"),
    _S("terminated_grace_seconds", positive_float,
       "how long a terminated query's series stay in /metrics"),
    _S("stale_seconds", positive_float,
       "series of a query with no event for this long are evicted"),
    _S("jobs_enabled", boolean, "run the scheduled jobs (retention, rollups, stalls)"),
    _S("retention_days", days, "days raw per-batch rows are kept"),
    _S("rollup_retention_days", days, "days rollups and runs are kept"),
    _S("retention_interval_seconds", interval, "how often retention runs (at least 0.1 s)"),
    _S("rollup_interval_seconds", interval, "how often rollups are recomputed (at least 0.1 s)"),
    _S("rollup_lookback_seconds", positive_float,
       "rollups recompute the buckets of this recent window (late events land in it)"),
    _S("stall_intervals", positive_int,
       "a run is stalled after this many trigger intervals without progress or idle"),
    _S("stall_min_seconds", non_negative_float,
       "a run is never stalled before this many seconds without events"),
    _S("stall_check_seconds", interval, "how often stall detection runs (at least 0.1 s)"),
    _S("evict_interval_seconds", interval, "how often stale series are evicted (at least 0.1 s)"),
    _S("worker_deadline_seconds", positive_float,
       "a background worker (the history pump) that shows no progress for this long is "
       "reported hung in /readyz; longer than the slowest history write"),
    _S("otlp", boolean,
       "export the catalogue over OTLP too (the otlp extra), configured by the standard "
       "OTEL_EXPORTER_OTLP_* variables, OTEL_RESOURCE_ATTRIBUTES and "
       "OTEL_METRIC_EXPORT_INTERVAL (docs/otlp.md)"),
    _S("replica", str, "name of this replica in job_runs (default: host-pid)"),
)
BY_NAME = {s.name: s for s in SETTINGS}
assert set(BY_NAME) == {f.name for f in fields(CollectorSettings)}


def default_values() -> dict[str, Any]:
    """Each setting's default, by name; defaults computed at start (the replica's host-pid) are
    left out: the help says them."""
    return {f.name: f.default for f in fields(CollectorSettings) if f.default is not MISSING}


def render_settings_table() -> str:
    """docs/collector.md's settings table, from :data:`SETTINGS` (a test keeps the doc equal)."""
    defaults = default_values()
    lines = ["| flag | environment variable | default | what |", "|---|---|---|---|"]
    for s in SETTINGS:
        flag = "(secret: no flag)" if s.secret else f"`{s.flag_form(metavar(s))}`"
        default = "–" if s.secret else shown_default(defaults.get(s.name))
        lines.append(f"| {flag} | `{s.env}` | {default} | {s.help} |")
    return "\n".join(lines)


def load_collector_settings(
    env: Mapping[str, str], flags: Mapping[str, str | None] | None = None,
    tokens_file: Path | None = None,
) -> CollectorSettings:
    """Resolve settings: flags > env > defaults; a bad value names the flag or env var."""
    values = resolve(SETTINGS, (flag_source(flags or {}), env_source(env)))
    if tokens_file is not None:
        values["tokens"] = parse_tokens_merged(env_tokens(env), read_tokens_file(tokens_file))
    settings = replace(CollectorSettings(), **values)
    check(settings)
    return settings


def env_tokens(env: Mapping[str, str]) -> str:
    """The ingest tokens the environment gives, as written, checked (kept when the tokens file
    is re-read; merged as text, so that a clash names an entry by its place as written)."""
    resolve((BY_NAME["tokens"],), (env_source(env),))  # refused naming the variable
    return env.get(BY_NAME["tokens"].env, "")


def parse_tokens_merged(env: str, file: str) -> tuple[tuple[str, str], ...]:
    """The ingest tokens of the environment's and of the tokens file's text (each checked by
    :func:`parse_tokens`) together, an entry given again (in either, or both) one token, kept as
    first written; a token the two give to different apps is refused naming the two entries by
    their position as written (as :func:`parse_tokens` numbers them), never by their text."""
    entries = [*_token_entries(env, f" of {BY_NAME['tokens'].env}"),
               *_token_entries(file, " of the tokens file")]
    try:
        return _one_owner_per_token(entries, _TWO_APPS, _APP_TOKEN, _same_scope)
    except ValueError as exc:
        raise SettingsError(f"ingest tokens: {exc}") from None


class TokensFileError(SettingsError):
    """The tokens file cannot be read, or its entries are refused; ``reason`` says why without
    naming the file (a log line that names it already)."""

    def __init__(self, path: Path, reason: str) -> None:
        # The path as given on the command line, cut: an error is one line of a log.
        super().__init__(f"--tokens-file {cut(str(path), SHOWN_CHARS)}: {reason}")
        self.reason = reason


def read_tokens_file(path: Path) -> str:
    """The tokens file's text, its entries checked (:func:`parse_tokens`)."""
    try:
        text = path.read_text()
        parse_tokens(text)
    except OSError as exc:
        raise TokensFileError(path, exc.strerror or type(exc).__name__) from None
    except ValueError as exc:
        # parse_tokens's words never quote an entry (each may hold a token); cut all the same.
        raise TokensFileError(path, cut(str(exc), SHOWN_CHARS)) from None
    return text


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
    check_roles_are_apart(settings)
    if settings.rollup_lookback_seconds > settings.retention_days * 86400:
        raise SettingsError(
            "--rollup-lookback-seconds is longer than --retention-days: rollups would be "
            "recomputed from rows retention already deleted"
        )


def check_roles_are_apart(settings: CollectorSettings) -> None:
    """One token in two roles grants both, and the broader wins: a tenant's read token that is
    also the admin's reads every tenant's history (Auth.read_scope); an ingest token, which every
    pushing driver holds in its environment, that is also the admin read or the scrape token
    reads every tenant's data or series; an ingest token that is a tenant's read token reads that
    tenant's. Also run on a SIGHUP reload of the ingest tokens. Names the variables, never the
    token."""
    ingest = (f"{BY_NAME['tokens'].env} (or --tokens-file)",
              {token for _, token in settings.tokens})
    admin = (BY_NAME["read_token"].env, _one(settings.read_token))
    scrape = (BY_NAME["scrape_token"].env, _one(settings.scrape_token))
    tenant = (BY_NAME["tenant_read_tokens"].env,
              {token for _, token in settings.tenant_read_tokens})
    # The admin read token also opens /metrics: the same token as the scrape token grants nothing
    # more, so that pair alone may share one.
    for (one, mine), (other, theirs) in ((tenant, ingest), (tenant, admin), (tenant, scrape),
                                         (ingest, admin), (ingest, scrape)):
        if mine & theirs:
            raise SettingsError(
                f"one token is given in both {one} and {other}: whoever holds it would have "
                "both roles; give each role a token of its own")


def _one(token: str | None) -> set[str]:
    return set() if token is None else {token}


def inflight_bound(settings: CollectorSettings) -> int:
    """Request bytes decoded at once: the setting, by default room for two requests at the body
    limit (what the memory budget in docs/collector.md is computed from)."""
    return settings.max_inflight_body_bytes or 2 * settings.max_body_bytes


def spool_share(settings: CollectorSettings, tenants: int) -> int:
    """The spool bytes one tenant's pending records may hold while the ingest tokens name
    ``tenants`` tenants: the whole bound for one (a single-tenant collector keeps its whole
    spool), ``spool_tenant_share`` of it for more, so that one tenant's backlog (a slow history)
    never fills the spool and turns every other tenant's pushes away."""
    if tenants <= 1:
        return settings.spool_max_bytes
    return max(1, int(settings.spool_max_bytes * settings.spool_tenant_share))
