"""The time a writer acts at: its own clock, or the database's where its own is ahead of it.

A host's clock may jump ahead (years, once). A time it writes into the shared history then stays
ahead of every other writer's: a claimed slot found taken by each of them when their clocks come
to it, a replica's report counting as fresh for as long. So a writer whose clock is ahead of the
database's by more than :data:`~sparkwatch.history.lost.AHEAD_SLACK` acts at the database's time
(:func:`bounded`); within the slack it keeps its own (a few seconds of skew are every host's).
The database's clock is PostgreSQL's, shared by every writer; SQLite's is this host's, shared by
every process on the database's file (:func:`database_now`).
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from sparkwatch.history.lost import AHEAD_SLACK


def database_now(conn: sa.Connection) -> datetime:
    """The database's clock: PostgreSQL's (its transaction's start), shared by every replica;
    SQLite's is this host's, which every process on the database's file shares."""
    if conn.dialect.name == "postgresql":
        return conn.execute(sa.text("SELECT now()")).scalar_one().astimezone(UTC)
    return datetime.now(UTC)


def bounded(clock: datetime, database: datetime) -> datetime:
    """``clock``, or ``database`` where ``clock`` is ahead of it by more than
    :data:`~sparkwatch.history.lost.AHEAD_SLACK`."""
    return clock if clock <= database + AHEAD_SLACK else database


def bounded_now(conn: sa.Connection, clock: datetime) -> datetime:
    """:func:`bounded` against the database's clock now."""
    return bounded(clock, database_now(conn))
