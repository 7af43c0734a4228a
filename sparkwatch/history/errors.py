"""Errors of the SQL history, each worded as one line a user can act on.

The CLI shows them as they are; the listener's writer thread only sees them for a bad URL (a
configuration error, not worth retrying). Database failures while writing stay SQLAlchemy errors.
"""

from __future__ import annotations

import sqlalchemy as sa

UPGRADE_HINT = "run `sparkwatch db upgrade`"


class HistoryError(Exception):
    """Base of every history error. ``str()`` is the whole detail, for whoever owns the setup (a
    command line, a server's log): it may name the database's host, name or file and a setting.
    :attr:`public` says what is wrong in general terms, for a reader who must not learn where
    the history lives (a tenant of the collector's read API)."""

    public = "the history cannot be read"


class HistoryUrlError(HistoryError):
    """The URL cannot be used: malformed, unknown or unsupported database, missing driver."""

    public = "the history cannot be read: its database URL cannot be used"


class HistoryUnavailable(HistoryError):
    """The database cannot be reached or opened. ``hint``: what a command's user can do (a
    server that owns the setting says its own)."""

    public = "the history cannot be read: its database cannot be reached or opened"

    def __init__(self, message: str, hint: str = "") -> None:
        self.message = message
        self.hint = hint
        super().__init__(message + (f" ({hint})" if hint else ""))


class SchemaNotMigrated(HistoryError):
    """The database has no history schema, or not the one this sparkwatch reads."""

    public = ("the history cannot be read: its database does not have the schema this "
              "sparkwatch reads (not migrated)")


class MigrationError(HistoryError):
    """Alembic refused a migration command (unknown revision, ...)."""

    public = "the history cannot be read: its schema could not be migrated"


class UnknownQuery(HistoryError):
    """No query matches the id or name given. ``where`` (the history's database, described) and
    ``hint`` help at a command line; :attr:`message` leaves them out for an answer served to a
    reader, who must not learn where the history lives."""

    def __init__(self, message: str, where: str = "", hint: str = "") -> None:
        self.message = message
        super().__init__(message + (f" in {where}" if where else "")
                         + (f" ({hint})" if hint else ""))


class UnknownOperator(HistoryError):
    """The query has no state operator at the index given."""


class UnknownRun(HistoryError):
    """The query has no run of the id given (that ended with what was asked for)."""


class NotANumber(HistoryError):
    """A number column of the history holding something no computation can use: text or a blob
    (SQLite keeps whatever it is given, in an INTEGER column too), NaN or an infinity where what
    is read has no "no value". ``str()`` names ``table.column`` and the query; ``query_id`` lets
    a reader of many queries leave that one out (``sparkwatch top``)."""

    public = ("the history cannot be read: a row holds something other than a number where "
              "one belongs")

    def __init__(self, message: str, query_id: str) -> None:
        self.query_id = query_id
        super().__init__(message)


def is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is about the data written, not the database: retrying the same data will
    fail the same way (the collector quarantines such events, the listener's history sink drops
    them, one by one, so that they hold up nothing else). Only PEP 249's data errors, a value the
    driver cannot bind and Python's own conversion errors are: a database that is read-only (a
    failover onto a standby), refuses a privilege, times out on a lock or a statement, deadlocks,
    has a full disk or another schema than this sparkwatch's takes the same data once it is put
    right, and must not send acknowledged events to the quarantine on the way."""
    if isinstance(exc, sa.exc.DBAPIError):
        return isinstance(exc, sa.exc.DataError | sa.exc.IntegrityError)
    if isinstance(exc, sa.exc.SQLAlchemyError):
        return isinstance(exc, sa.exc.StatementError)  # e.g. a value the driver cannot bind
    # A driver's own error, unwrapped (PostgreSQL's COPY runs on psycopg's connection): by its
    # DB-API class, e.g. psycopg's NumericValueOutOfRange is a DataError.
    if _is_dbapi(exc, _DBAPI_DATA_ERRORS):
        return True
    if isinstance(exc, HistoryError) or _is_dbapi(exc, _DBAPI_ERRORS):
        return False
    return isinstance(exc, ValueError | TypeError | OverflowError | KeyError | UnicodeError)


def is_database_fault(exc: BaseException) -> bool:
    """Whether ``exc`` says the database cannot take a write now, whatever the data: down,
    read-only, a privilege refused, a lock or statement timeout, a deadlock, a full disk, a
    schema this sparkwatch does not write (see :func:`is_data_error`). Retry the same data."""
    if is_data_error(exc):
        return False
    return isinstance(exc, sa.exc.DBAPIError | sa.exc.DisconnectionError | HistoryError
                      | OSError) or _is_dbapi(exc, _DBAPI_ERRORS)


def _is_dbapi(exc: BaseException, names: frozenset[str]) -> bool:
    return any(c.__name__ in names for c in type(exc).__mro__)


_DBAPI_DATA_ERRORS = frozenset({"DataError", "IntegrityError"})
"""PEP 249's exceptions about the data (every driver defines its own classes of these names)."""
_DBAPI_ERRORS = frozenset({"DatabaseError", "InterfaceError"})
"""PEP 249's two bases of every error a database driver raises."""
