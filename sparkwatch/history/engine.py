"""Engines for history URLs, with the URL and connection errors worded for users."""

from __future__ import annotations

import functools
import re
import sqlite3
import urllib.parse
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL

from sparkwatch.history.errors import HistoryUnavailable, HistoryUrlError
from sparkwatch.jsoncodec import dumps_text
from sparkwatch.redact import redact_url
from sparkwatch.summary import one_line

SUPPORTED = ("sqlite", "postgresql")
# Fail fast on an unreachable host instead of waiting for the OS TCP timeout (minutes).
PG_CONNECT_TIMEOUT_SECONDS = 10
SQLITE_WRITER_BUSY_SECONDS = 60
"""How long the history writer's SQLite connection waits for another's lock. The file keeps
SQLite's rollback journal, not WAL: under WAL every reader (Grafana's SQLite plugin with read
access only included) would need write access to the file's directory for the ``-shm`` index
once the writer has closed. So a writer's commit waits for the reads in progress to end (the
history's reads take milliseconds; a History dashboard over weeks, seconds): the writer has a
thread of its own and may wait, and must not fail a write for a read. Readers keep SQLite's own
5 s: a command in that wait hears Ctrl-C only once SQLite returns."""


# What SQLAlchemy's URL grammar reads as the host and port: everything after the credentials (a
# password ends at its first '@') up to the path or query.
_AFTER_CREDENTIALS = re.compile(r"[\w+]+://(?:[^:/]*(?::[^@]*)?@)?(?P<host>[^/?]*)")
AT_IN_HOST = (
    "database URL refused: an '@' follows its credentials and would be read as part of the "
    "host: percent-encode '@' in the password as %40 (postgresql://USER:MY%40PASS@HOST/DB)"
)
"""Said in place of the URL, which a message cannot show: the host SQLAlchemy would read is the
tail of the password (``user:my@pass@host`` is password ``my``, host ``pass@host``), and the
driver's "failed to resolve host" then showed it."""


def parse_url(url: str) -> URL:
    """Parse and check a history URL; bare ``postgresql://`` means psycopg 3 (our dependency)."""
    after = _AFTER_CREDENTIALS.match(url)
    if after is not None and "@" in after["host"]:
        raise HistoryUrlError(AT_IN_HOST)
    try:
        parsed = sa.engine.make_url(url)
        parsed.port  # noqa: B018 - a port that is not a number fails here, not deep in a driver
    except (sa.exc.ArgumentError, ValueError):
        raise HistoryUrlError(
            f"not a database URL: {redact_url(url)} "
            "(expected sqlite:///FILE or postgresql://USER@HOST[:PORT]/DB)"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        raise HistoryUrlError(
            f"unsupported database {backend!r} in {describe_url(parsed)}: "
            "the history supports sqlite and postgresql"
        )
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def describe_url(url: str | URL) -> str:
    """The URL fit for messages and logs (see :func:`sparkwatch.redact.redact_url`)."""
    return redact_url(url)


READ_LOCK_SECONDS = 30.0
"""The most a command's read (``history``, ``doctor``, ``top``) waits for a lock on PostgreSQL:
behind a migration's ALTER TABLE or a partition being created it waited in silence for as long
as they took (SQLite's readers give up after its busy timeout, 5 s). Then it says so."""

POOL_SECONDS = 3.0
"""With read bounds: the most a read waits for a connection of a full pool before it fails
(:class:`NoFreeConnection`; SQLAlchemy's default is 30 s)."""


def create_engine(url: str, must_exist: bool = False,
                  sqlite_busy_seconds: float | None = None,
                  quick_seconds: int | None = None,
                  read_bounds: tuple[float, float] | None = None,
                  lock_seconds: float | None = None) -> sa.Engine:
    """An engine for ``url``; with ``must_exist`` a missing SQLite file is an error, not created;
    ``sqlite_busy_seconds``: how long SQLite waits for another connection's lock (its default 5);
    ``quick_seconds``: on PostgreSQL, the most a connect, a statement or a wait for a lock may
    take (for a lookup that must not hold up what asks it); ``read_bounds``: a server's reads,
    (statement seconds, lock seconds): PostgreSQL's statement_timeout and lock_timeout, SQLite's
    busy timeout, and a wait for a connection of a full pool of :data:`POOL_SECONDS` (a slow
    statement must not hold its thread and connection for as long as the database lets it);
    ``lock_seconds``: on PostgreSQL, the most a statement waits for a lock (lock_timeout), and no
    bound on the statement itself (a command's read, see :data:`READ_LOCK_SECONDS`).

    Connects lazily: reachability errors surface in :func:`connect`.
    """
    parsed = parse_url(url)
    if must_exist:
        _check_sqlite_file(parsed)
    # JIT off: the history's reads are short, but on the partitioned tables (migration 0010) the
    # planner's cost sums over every day's partition and crosses jit_above_cost, and compiling
    # then takes 10x the query (docs/benchmarks.md, "History queries at 20.7 million ...").
    # Time zone UTC: the driver reads timestamps back in the session's zone, and in a server's
    # other zone an accepted time near year 1 or 9999 falls outside what Python holds (reads
    # answered 503, the stall job failed every run).
    if read_bounds is not None:
        sqlite_busy_seconds = read_bounds[1]
    connect_args: dict[str, object] = (
        _pg_args(quick_seconds, read_bounds, lock_seconds) if _is_pg(parsed) else
        {} if sqlite_busy_seconds is None else {"timeout": sqlite_busy_seconds})
    try:
        # JSON columns as compact orjson text: SQLAlchemy's default (the standard library with
        # spaces) was a tenth of the SQLite writer's CPU, and spelled the maps otherwise than
        # PostgreSQL's COPY path (docs/benchmarks.md, "A write path near the floor").
        pool: dict[str, object] = {} if read_bounds is None else {"pool_timeout": POOL_SECONDS}
        engine = sa.create_engine(parsed, connect_args=connect_args, json_serializer=dumps_text,
                                  **pool)
    except (ImportError, sa.exc.NoSuchModuleError) as exc:
        raise HistoryUrlError(
            f"cannot load the database driver for {describe_url(parsed)}: {exc} "
            "(for PostgreSQL: pip install 'sparkwatch[postgres]')"
        ) from None
    if not _is_pg(parsed):
        sa.event.listen(engine, "connect", _text_replacing_bad_bytes)
    return engine


def _text_replacing_bad_bytes(dbapi_connection: sqlite3.Connection, record: object) -> None:
    """SQLite stores whatever bytes it is given as TEXT (another tool's, a CAST of a blob), and
    Python's decoding of one value that is not UTF-8 failed the whole read: every history command
    over a history holding it. Such text reads with its bad bytes as U+FFFD, which still parses
    in a JSON column (a backslash escape would not)."""
    dbapi_connection.text_factory = _DECODE_REPLACING


# str itself, with its arguments bound in C: no Python frame per text value read.
_DECODE_REPLACING = functools.partial(str, encoding="utf-8", errors="replace")


def _pg_args(quick_seconds: int | None,
             read_bounds: tuple[float, float] | None = None,
             lock_seconds: float | None = None) -> dict[str, object]:
    options = "-c jit=off -c timezone=UTC"
    if quick_seconds is not None:
        ms = quick_seconds * 1000
        return {"connect_timeout": max(quick_seconds, 2),  # libpq's least is 2 s
                "options": f"{options} -c statement_timeout={ms} -c lock_timeout={ms}"}
    if read_bounds is not None:
        statement_ms, lock_ms = (int(seconds * 1000) for seconds in read_bounds)
        options += f" -c statement_timeout={statement_ms} -c lock_timeout={lock_ms}"
    elif lock_seconds is not None:
        options += f" -c lock_timeout={int(lock_seconds * 1000)}"
    return {"connect_timeout": PG_CONNECT_TIMEOUT_SECONDS, "options": options}


class ReadTimedOut(HistoryUnavailable):
    """A read ran past its bound (``read_bounds`` of :func:`create_engine`) or waited past it
    for a lock; the history may be fine, and busy."""

    public = ("the read took too long: it ran past the bound on one history read, or waited "
              "past it for a lock; retry later, or ask for a narrower range or fewer rows")


class NoFreeConnection(HistoryUnavailable):
    """No connection of the engine's pool freed up in time: too many reads at once."""

    public = "reads are busy: too many history reads at once; retry shortly"


LOCK_NOT_AVAILABLE = "55P03"
"""PostgreSQL's lock_not_available: a statement's lock_timeout ran out."""
# PostgreSQL's query_canceled (statement_timeout) and lock_not_available (lock_timeout).
_TIMED_OUT_STATES = ("57014", LOCK_NOT_AVAILABLE)


def read_failure(exc: sa.exc.SQLAlchemyError) -> HistoryUnavailable:
    """What a failed read is, for its answer: :class:`ReadTimedOut` past its bound, a busy
    SQLite file or a timed-out statement; :class:`NoFreeConnection` for a full pool; else the
    history is unavailable. The message (for the log) has the driver's words."""
    if isinstance(exc, sa.exc.TimeoutError):
        return NoFreeConnection(f"history read found no free connection: {one_line(exc)}")
    orig = getattr(exc, "orig", None)
    if getattr(orig, "sqlstate", None) in _TIMED_OUT_STATES or (
            isinstance(exc, sa.exc.OperationalError) and "database is locked" in str(orig)):
        return ReadTimedOut(f"history read timed out: {one_line(exc)}")
    return HistoryUnavailable(f"history query failed: {one_line(exc)}")


def connect(engine: sa.Engine) -> sa.Connection:
    """Open a connection, turning "cannot connect" into :class:`HistoryUnavailable`."""
    try:
        return engine.connect()
    except sa.exc.TimeoutError as exc:
        raise read_failure(exc) from None
    except sa.exc.DBAPIError as exc:
        raise HistoryUnavailable(
            f"cannot connect to {describe_url(engine.url)}: {driver_message(exc)}"
        ) from None


def driver_message(exc: sa.exc.DBAPIError) -> str:
    """The first line of the driver's own message, without SQLAlchemy's wrapping."""
    return one_line(exc)


def _is_pg(url: URL) -> bool:
    return url.get_backend_name() == "postgresql"


def _check_sqlite_file(url: URL) -> None:
    """Refuse a SQLite file that does not exist: SQLite would create it, empty."""
    path = sqlite_file(url)
    if path is not None and not Path(path).exists():
        raise HistoryUnavailable(
            f"no history database at {path}",
            "set --url or SPARKWATCH_HISTORY_URL, or create it with `sparkwatch db upgrade`")


def sqlite_file(url: URL) -> str | None:
    """The file a SQLite URL opens (as SQLite reads it, a URI's path included:
    ``sqlite:///file:/tmp/h.db?uri=true``); None for an in-memory database or another backend."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    try:
        uri = sa.util.asbool(url.query.get("uri", False))
    except ValueError:
        uri = False  # the driver refuses it when it connects
    if uri and database.startswith("file:"):
        # SQLite's URI: file:PATH or file://[localhost]/PATH, percent-encoded, up to a '#'.
        # SQLAlchemy passes the URL's query on to it (mode=memory among it).
        if url.query.get("mode") == "memory":
            return None
        rest = database.removeprefix("file:").partition("#")[0]
        if rest.startswith("//"):
            rest = "/" + rest[2:].partition("/")[2]
        database = urllib.parse.unquote(rest)
    return None if database in ("", ":memory:") else database
