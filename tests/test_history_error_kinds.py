"""Which write failures are about the data (set aside one by one: retrying fails alike) and which
about the database (the same data is retried until it takes it): the collector's quarantine and
the listener's history sink both decide by these."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import errors as pg

from sparkwatch.history.errors import (
    HistoryUnavailable,
    MigrationError,
    SchemaNotMigrated,
    is_data_error,
    is_database_fault,
)


def _wrapped(exc: Exception) -> sa.exc.DBAPIError:
    return sa.exc.DBAPIError.instance("INSERT ...", {}, exc, psycopg.Error)


DATABASE_FAULTS = [
    pg.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),
    pg.InsufficientPrivilege("permission denied for table query_runs"),
    pg.LockNotAvailable("canceling statement due to lock timeout"),
    pg.QueryCanceled("canceling statement due to statement timeout"),
    pg.DeadlockDetected("deadlock detected"),
    pg.DiskFull("could not extend file"),
    pg.UndefinedColumn('column "tenant" does not exist'),
    pg.UndefinedTable('relation "batches" does not exist'),
    psycopg.OperationalError("server closed the connection unexpectedly"),
]
DATA_ERRORS = [
    pg.NumericValueOutOfRange("integer out of range"),
    pg.StringDataRightTruncation("value too long"),
    pg.UntranslatableCharacter("unsupported Unicode escape sequence"),
    pg.UniqueViolation("duplicate key value"),
    pg.CheckViolation("violates check constraint"),
]


@pytest.mark.parametrize("exc", DATABASE_FAULTS, ids=lambda e: type(e).__name__)
def test_a_database_that_cannot_take_a_write_is_retried_never_quarantined(
        exc: Exception) -> None:
    for raised in (exc, _wrapped(exc)):  # COPY raises psycopg's own; SQLAlchemy wraps the rest
        assert (is_database_fault(raised), is_data_error(raised)) == (True, False), raised


@pytest.mark.parametrize("exc", DATA_ERRORS, ids=lambda e: type(e).__name__)
def test_a_value_or_constraint_the_database_refuses_is_about_the_data(exc: Exception) -> None:
    for raised in (exc, _wrapped(exc)):
        assert (is_database_fault(raised), is_data_error(raised)) == (False, True), raised


@pytest.mark.parametrize("exc", [
    MigrationError("history schema 0099 is newer than this sparkwatch"),
    SchemaNotMigrated("no history schema"),
    HistoryUnavailable("could not connect"),
    OSError("Connection refused"),
], ids=lambda e: type(e).__name__)
def test_a_schema_this_sparkwatch_does_not_write_is_a_fault_of_the_database(
        exc: Exception) -> None:
    assert (is_database_fault(exc), is_data_error(exc)) == (True, False)


def test_python_side_conversion_errors_are_about_the_data_and_other_bugs_about_neither() -> None:
    assert is_data_error(OverflowError("Python int too large to convert to SQLite INTEGER"))
    assert is_data_error(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"))
    bug = AttributeError("'NoneType' object has no attribute 'run_id'")
    assert (is_database_fault(bug), is_data_error(bug)) == (False, False)  # retried, then isolated
