"""Errors of the SQL history, each worded as one line a user can act on.

The CLI shows them as they are; the listener's writer thread only sees them for a bad URL (a
configuration error, not worth retrying). Database failures while writing stay SQLAlchemy errors.
"""

from __future__ import annotations

UPGRADE_HINT = "run `sparkwatch db upgrade`"


class HistoryError(Exception):
    """Base of every history error."""


class HistoryUrlError(HistoryError):
    """The URL cannot be used: malformed, unknown or unsupported database, missing driver."""


class HistoryUnavailable(HistoryError):
    """The database cannot be reached or opened."""


class SchemaNotMigrated(HistoryError):
    """The database has no history schema, or not the one this sparkwatch reads."""


class MigrationError(HistoryError):
    """Alembic refused a migration command (unknown revision, ...)."""


class UnknownQuery(HistoryError):
    """No query matches the id or name given."""


class UnknownOperator(HistoryError):
    """The query has no state operator at the index given."""
