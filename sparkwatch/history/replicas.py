"""How far each collector replica has written what it acknowledged (``replica_progress``).

A replica acknowledges events into a spool of its own and writes them to the shared history
later, so the history alone cannot tell a silent run from one whose events another replica still
holds (its spool draining after a database outage). Each replica reports its pump's
``written_until`` every few seconds; the jobs that judge silence (stalls, lost runs) look no
further than the least of the live replicas'. A replica that stopped reporting is gone (stopped,
scaled down, dead): after :data:`LIVE_SECONDS` its backlog no longer holds the others back, and a
replica that stops with nothing pending says so at once (:func:`forget`).

A report is made at the replica's clock, or the database's where the replica's is ahead of it by
more than :data:`~sparkwatch.history.lost.AHEAD_SLACK` (:mod:`.clock`): one whose clock jumped
years ahead counted as live for years, and once it died with a backlog held every other
replica's stall detection back as long (and its clean-up deleted every other report). A report
stored ahead by an older version is brought back to the database's time by the next report.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from sparkwatch.history.clock import bounded, database_now
from sparkwatch.history.lost import AHEAD_SLACK
from sparkwatch.history.schema import ReplicaProgress

LIVE_SECONDS = 300.0
"""A replica whose last report is older is not waited for."""
KEPT = timedelta(days=1)
"""Reports of replicas gone longer are deleted (each start of a replica is a new name)."""


def report(conn: sa.Connection, replica: str, written_until: datetime, now: datetime) -> None:
    """Record ``replica``'s ``written_until`` as reported at ``now`` (this replica's clock,
    bounded by the database's) in the caller's transaction."""
    database = database_now(conn)
    now = bounded(now, database)
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(ReplicaProgress).values(
        replica=replica, written_until=written_until, reported_at=now)
    conn.execute(stmt.on_conflict_do_update(
        index_elements=["replica"],
        set_={"written_until": stmt.excluded.written_until,
              "reported_at": stmt.excluded.reported_at}))
    at = ReplicaProgress.reported_at
    conn.execute(sa.update(ReplicaProgress).where(at > database + AHEAD_SLACK)
                 .values(reported_at=database))
    conn.execute(sa.delete(ReplicaProgress).where(at < now - KEPT))


def forget(conn: sa.Connection, replica: str) -> None:
    """``replica`` stops with every event it acknowledged written: nothing to wait for."""
    conn.execute(sa.delete(ReplicaProgress).where(ReplicaProgress.replica == replica))


def least_written_until(conn: sa.Connection, now: datetime, other_than: str | None = None
                        ) -> datetime | None:
    """The least ``written_until`` of the replicas (but ``other_than``) that reported within
    :data:`LIVE_SECONDS`; None when none has."""
    live = ReplicaProgress.reported_at >= now - timedelta(seconds=LIVE_SECONDS)
    if other_than is not None:
        live = live & (ReplicaProgress.replica != other_than)
    return conn.execute(sa.select(sa.func.min(ReplicaProgress.written_until)).where(live)
                        ).scalar_one_or_none()
