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


def is_data_error(exc: BaseException) -> bool:
    """Whether ``exc`` is about the data written, not the database's availability: retrying the
    same data will fail the same way (the collector quarantines such events, the listener's
    history sink drops them, one by one, so that they hold up nothing else)."""
    if isinstance(exc, sa.exc.DBAPIError):
        return not isinstance(exc, sa.exc.OperationalError | sa.exc.InterfaceError) \
            and not exc.connection_invalidated
    if isinstance(exc, sa.exc.SQLAlchemyError):
        return isinstance(exc, sa.exc.StatementError)  # e.g. a value the driver cannot bind
    # A driver's own error, unwrapped (PostgreSQL's COPY runs on psycopg's connection): by its
    # DB-API class, e.g. psycopg's NumericValueOutOfRange is a DataError.
    if any(c.__name__ in _DBAPI_DATA_ERRORS for c in type(exc).__mro__):
        return True
    return isinstance(exc, ValueError | TypeError | OverflowError | KeyError | UnicodeError)


_DBAPI_DATA_ERRORS = frozenset({"DataError", "IntegrityError"})
"""PEP 249's exceptions about the data (every driver defines its own classes of these names)."""
