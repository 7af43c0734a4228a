"""Runs whose driver died: ended as ``lost`` instead of staying "running" for ever.

A driver killed without a ``QueryTerminated`` (SIGKILL, an OOM, a lost node) leaves its runs
running in the history. Two rules end them, at the time of their last event:

- **replaced**: a query runs once at a time, so when a new run of a query starts, every earlier
  run of it that is still running is over (exact, applied by the writer with the new run);
- **abandoned**: a listener that detaches (its session stopping, its driver exiting on a signal)
  ends the runs it saw start and never saw end: no one will record their end now;
- **silent**: a run with no event for ``silent_seconds`` is lost: the collector's stall horizon
  (``--retention-days``, 7 by default), until which such a run is reported stalled; the same 7
  days in a driver's own history. A run that speaks again after all is running again (the
  writer's upsert revives it), unless a later run of its query started meanwhile
  (:func:`replaced`): then what it says is a late event of a run that is over, stored but not
  bringing it back to life next to the run that replaced it.

A lost run ends at its last event, but never before it started (:func:`_lost_at`): a start
stamped ahead by the driver's clock (ingest takes up to a day) is kept as stamped while
``last_event_at`` is no later than when the writer heard it, and such a run ended lost was a run
of negative length. Silence is measured from ``last_event_at`` no later than the job's clock
(:func:`bring_back_ahead`): a time stored ahead of it by an older writer (years ahead, before
ingest bounded an event's time) kept a dead driver's run "running" for good, as no event of its
would come to bring it back.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

import sqlalchemy as sa

from sparkwatch.history.rows import Row
from sparkwatch.history.schema import LOST, RUNNING, QueryRun

DEFAULT_SILENT_SECONDS = 7 * 86_400.0


def end_replaced(conn: sa.Connection, runs: Iterable[Row]) -> int:
    """End, as lost, the running runs of each query that one of ``runs`` (a run's row, as the
    writer builds them) starts anew; returns how many."""
    ended = 0
    r = QueryRun.__table__.c
    for run in runs:
        if run["started_at"] is None:
            continue
        ended += conn.execute(
            sa.update(QueryRun).where(
                r.tenant == run["tenant"], r.query_id == run["query_id"],
                r.run_id != run["run_id"], r.status == RUNNING,
                r.last_event_at <= run["started_at"],
            ).values(status=LOST, ended_at=_lost_at())
        ).rowcount
    return ended


def end_silent(conn: sa.Connection, now: datetime, silent_seconds: float,
               heard_by: datetime | None = None) -> int:
    """End, as lost, the running runs with no event for ``silent_seconds`` before ``now``;
    returns how many. ``heard_by``: the clock's time (``now`` unless given; the collector
    measures silence up to an earlier ``now`` while its spool drains), before which every
    running run was heard (:func:`bring_back_ahead`)."""
    bring_back_ahead(conn, now if heard_by is None else heard_by)
    r = QueryRun.__table__.c
    return conn.execute(
        sa.update(QueryRun).where(
            r.status == RUNNING, r.last_event_at < now - timedelta(seconds=silent_seconds)
        ).values(status=LOST, ended_at=_lost_at())
    ).rowcount


def bring_back_ahead(conn: sa.Connection, now: datetime, ended: bool = False) -> int:
    """Bring the ``last_event_at`` of running runs (``ended``: of ended runs) stored later than
    ``now`` (past :data:`AHEAD_SLACK`) back to ``now``, as
    the writer does on a run's next write (an older writer stored the events' own times, up to
    years ahead; a replica whose clock ran ahead stores its own): their silence is measured from
    now on, so that a driver that died is stalled, then lost, instead of running for good; an
    ended run's age too, so that retention deletes it once it has been due since (it kept such
    runs for good). Returns how many."""
    r = QueryRun.__table__.c
    which = r.status != RUNNING if ended else r.status == RUNNING
    return conn.execute(
        sa.update(QueryRun).where(which, r.last_event_at > now + AHEAD_SLACK)
        .values(last_event_at=now)
    ).rowcount


AHEAD_SLACK = timedelta(minutes=5)
"""How far ahead of the job's clock a running run's last event may stand and be left alone:
another replica's clock a little ahead (each writer stores its own time), whose fresh rows the
job would otherwise rewrite at every pass, in the writers' way."""


def end_abandoned(conn: sa.Connection, run_ids: Collection[str]) -> int:
    """End, as lost, those of ``run_ids`` still running; returns how many."""
    if not run_ids:
        return 0
    r = QueryRun.__table__.c
    return conn.execute(
        sa.update(QueryRun).where(r.run_id.in_(list(run_ids)), r.status == RUNNING)
        .values(status=LOST, ended_at=_lost_at())
    ).rowcount


def _lost_at() -> sa.ColumnElement[datetime]:
    """When a run ended as lost ends: at its last event, or at its start where that is later
    (a start stamped ahead by the driver's clock, kept as stamped, while ``last_event_at`` is
    no later than when it was heard): never a run of negative length."""
    r = QueryRun.__table__.c
    return sa.case((r.started_at > r.last_event_at, r.started_at), else_=r.last_event_at)


def replaced() -> sa.ColumnElement[bool]:
    """Whether another run of the query of the ``query_runs`` row being updated (in its tenant)
    started after it: a query runs once at a time, so that row's run is over for good. After:
    after its start or, for a run whose start the history lacks (a listener attached
    mid-run), no earlier than its last event (as :func:`end_replaced` decides)."""
    # The row named by its table: SQLAlchemy correlates no subquery of an upsert's SET with the
    # table upserted into (query_runs.c would add a second query_runs to the subquery's FROM).
    run = {c.name: sa.literal_column(f"{QueryRun.__tablename__}.{c.name}", c.type)
           for c in QueryRun.__table__.c}
    later = QueryRun.__table__.alias("later_run").c
    return sa.exists().where(
        later.tenant == run["tenant"], later.query_id == run["query_id"],
        later.run_id != run["run_id"],
        (later.started_at > run["started_at"]) | (later.started_at >= run["last_event_at"]),
    )
