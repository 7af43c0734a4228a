"""Which history URL a command uses (--url, else SPARKWATCH_HISTORY_URL, else the default), and
the one check of a history URL that the commands, the collector and the listener's attach share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sparkwatch.history.errors import HistoryUrlError
from sparkwatch.redact import MASK
from sparkwatch.settings.cli import HISTORY_URL
from sparkwatch.settings.listener import DEFAULT_HISTORY_URL
from sparkwatch.summary import one_line

if TYPE_CHECKING:  # SQLAlchemy is imported inside the checks: every command imports this module
    from sqlalchemy.engine import URL


def resolve_url(given: str | None, from_env: bool = False) -> str:
    """The URL to use: ``given`` (--url's value, or the env var's when ``from_env``: parsed as the
    listener parses it, 'off' disables), else the default."""
    if given is None:
        return DEFAULT_HISTORY_URL
    where = HISTORY_URL.env if from_env else "--url"
    try:
        given.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 in argv or the environment
        raise HistoryUrlError(f"{where} is not UTF-8 text") from None
    if not from_env:
        if not given.strip():
            # An empty value is no choice: the default would be used (and `db upgrade` create
            # it) where a variable meant to fill it was not set.
            raise HistoryUrlError("--url is empty: give a database URL, e.g. "
                                  "sqlite:///sparkwatch.db")
        return given
    url = HISTORY_URL.parse(given)
    if url is None:
        raise HistoryUrlError(f"the history is disabled ({HISTORY_URL.env}={given!r}); pass --url")
    return str(url)


def checked_url(url: str) -> URL:
    """``url`` parsed as a history URL (:func:`~sparkwatch.history.engine.parse_url`), its port
    in range; else :class:`HistoryUrlError`, showing the URL only without its password."""
    from sparkwatch.history.engine import parse_url

    parsed = parse_url(url)
    if parsed.port is not None and not 0 <= parsed.port <= 65535:
        # SQLAlchemy takes any number; the driver then failed on a host it could not name.
        raise HistoryUrlError(f"port {parsed.port} is out of range 0-65535")
    return parsed


def durable_url(url: str, holder: str = "this command") -> URL:
    """:func:`checked_url`, refusing an in-memory SQLite database: each connection gets an empty
    one of its own, gone when ``holder`` exits (a replay "wrote" events nowhere and dropped them
    from the quarantine; a collector acknowledged events it could never keep)."""
    from sparkwatch.history.engine import describe_url

    parsed = checked_url(url)
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or parsed.query.get("mode") == "memory" \
        or "mode=memory" in database
    if parsed.get_backend_name() == "sqlite" and in_memory:
        raise HistoryUrlError(
            f"{describe_url(url)} is an in-memory database, gone when {holder} exits: it cannot "
            "hold a history (give a file, e.g. sqlite:///sparkwatch.db)"
        )
    _refuse_async_driver(url, parsed)
    _refuse_missing_folder(parsed)
    return parsed


def _refuse_async_driver(url: str, parsed: URL) -> None:
    """An asyncio driver (postgresql+psycopg_async, sqlite+aiosqlite) loads, but every call of
    the history's synchronous engine then fails: the writer's first write, once the app ran."""
    import sqlalchemy as sa

    from sparkwatch.history.engine import describe_url

    try:
        dialect = parsed.get_dialect()
    except sa.exc.NoSuchModuleError:
        return  # an unknown driver: the engine's creation names it
    if getattr(dialect, "is_async", False):
        raise HistoryUrlError(
            f"{describe_url(url)}: {parsed.drivername} is an asyncio driver; the history "
            f"writes synchronously (use e.g. {parsed.get_backend_name()}+"
            f"{'psycopg' if parsed.get_backend_name() == 'postgresql' else 'pysqlite'})")


def _refuse_missing_folder(parsed: URL) -> None:
    """A SQLite file whose folder does not exist: SQLite cannot create the file there, and said
    only "unable to open database file" at the first write."""
    from sparkwatch.history.engine import sqlite_file

    path = sqlite_file(parsed)
    if path is None:
        return
    folder = Path(path).parent
    if not folder.is_dir():
        raise HistoryUrlError(f"no folder {folder} for the SQLite file {path} (SQLite "
                              "creates the file, not its folder)")


def writable_url(url: str, holder: str) -> None:
    """:func:`durable_url`, whose driver loads and takes the URL's options, as the history
    writer's engine is made; nothing is connected to: a database that is down is an outage a
    writer rides out, not a URL that can never work."""
    import sqlalchemy as sa

    from sparkwatch.history.engine import create_engine, describe_url

    password = durable_url(url, holder).password
    try:
        create_engine(url).dispose()
    except (sa.exc.ArgumentError, ValueError, TypeError) as exc:
        # What the driver makes of the URL's options (?timeout=abc), which every write would meet
        # again. Its message might quote the password back.
        reason = one_line(exc)
        if password:
            reason = reason.replace(str(password), MASK)
        raise HistoryUrlError(f"database URL refused: {describe_url(url)}: {reason}") from None
