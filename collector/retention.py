"""Retention: raw per-batch rows for ``raw_days``; rollups, runs and stall marks for
``rollup_days``; job claims for a day (and none more than a day ahead).

A run's age is its ``last_event_at``. An ended run's stored more than
:data:`~sparkwatch.history.lost.AHEAD_SLACK` ahead of the job's clock (an older writer stored
the events' own times, up to years ahead) is brought back to the job's time first, as the lost
job does for running runs: such a run is deleted ``rollup_days`` after the job first saw it,
instead of being kept for good; within the slack (a replica's clock a little ahead) it is left
as stored.

Children go first and by their own (denormalized) timestamp, so nothing relies on SQLite having
foreign keys switched on; a batch and its operator/source/sink rows share one timestamp, so they
always go together.

On a partitioned history (PostgreSQL, migration 0010) raw rows go a whole day at a time: the job
drops the partitions of every day that ended before the cutoff (a day is kept until all of it is
due, so rows live up to a day longer than ``raw_days``), and creates the partitions of the next
days ahead of the writes (:mod:`sparkwatch.history.partitions`).

On SQLite, run as a scheduled job (:meth:`Retention.in_chunks`), every table is deleted from
:data:`CHUNK_ROWS` rows per transaction: SQLite's rollback journal holds every page a
transaction changes, so one DELETE of a large backlog needs that much free disk, and on a nearly
full disk it failed every interval and the history never recovered. Each committed chunk frees
its pages for the next (and for the writer); a chunk the disk cannot journal is retried at half
the rows. A batch is deleted with its count in one chunk, so
``query_runs.batches`` stays exact; a reader between chunks may see a due batch whose operator
rows are gone already.

On PostgreSQL, run as a scheduled job, each partition step (a day created in one table, a day
dropped with its runs' counts) is a transaction of its own whose lock waits are bounded
(:data:`~sparkwatch.history.partitions.LOCK_WAIT_SECONDS`): its ACCESS EXCLUSIVE lock on the
parent table is held for that step only, and a step that would wait longer for another session
(a long read of ``batches``, pg_dump) is left for the next run (:class:`~.leases.Deferred`),
rather than stand in PostgreSQL's lock queue with every write and read of the history queued
behind it. The rest (rollups, stall marks, runs, claims) is one more transaction.

A stop (the collector shutting down) ends the job between two chunks or steps
(:class:`~.leases.JobStopped`): what was committed stays, the chunk in progress is rolled back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from sparkwatch.collector.leases import Deferred, JobStopped
from sparkwatch.history import counts, lost, partitions
from sparkwatch.history.schema import (
    Batch,
    JobRun,
    OperatorBatch,
    OperatorRollup,
    QueryRollup,
    QueryRun,
    QueryStall,
    SinkBatch,
    SourceBatch,
)

JOB_RUNS_KEPT = timedelta(days=1)
CHUNK_ROWS = 1000
"""Rows deleted per transaction on SQLite at most (:meth:`Retention.in_chunks`), a few hundred
KB of journal; halved for each chunk the disk has no room to journal."""


@dataclass(frozen=True, slots=True)
class Retention:
    raw_days: float
    rollup_days: float

    def __call__(self, conn: sa.Connection, now: datetime) -> dict[str, int]:
        """Delete what is due, in the caller's transaction; returns rows deleted per table."""
        return self._delete_due(conn, now, None)

    def in_chunks(self, conn: sa.Connection, now: datetime,
                  stopping: Callable[[], bool] = lambda: False) -> dict[str, int]:
        """:meth:`__call__`, committing every :data:`CHUNK_ROWS` rows on SQLite and every
        partition step on PostgreSQL (the connection's transaction must not be a context
        manager's: see :class:`~sparkwatch.collector.leases.ChunkedWork`); raises
        :class:`~.leases.JobStopped` once ``stopping()`` between two of them, and
        :class:`~.leases.Deferred` after the rest when partition DDL had to wait."""
        # The slot's claim on its own first: a chunk the full disk refuses, or a partition step
        # another session holds up, is rolled back alone.
        conn.commit()

        def commit() -> None:
            conn.commit()
            if stopping():
                raise JobStopped("retention")

        return self._delete_due(conn, now, commit)

    def _delete_due(self, conn: sa.Connection, now: datetime,
                    commit: Callable[[], None] | None) -> dict[str, int]:
        raw_cutoff = now - timedelta(days=self.raw_days)
        long_cutoff = now - timedelta(days=self.rollup_days)
        deleted: dict[str, int] = {}
        busy: partitions.PartitionsBusy | None = None
        if partitions.is_partitioned(conn):
            try:
                deleted.update(_partition_steps(conn, now, raw_cutoff, commit))
            except partitions.PartitionsBusy as exc:
                busy = exc  # the rest needs none of the raw tables' locks
            # The rest in one transaction (quick without the raw rows), committed by the caller.
            delete = _Deleter(conn, None)
        else:
            delete = _Deleter(conn, commit)
            for raw in (OperatorBatch, SourceBatch, SinkBatch):
                deleted[raw.__tablename__] = delete(raw, raw.timestamp < raw_cutoff)
            deleted["batches"] = delete.batches_before(raw_cutoff)
        for rollup in (QueryRollup, OperatorRollup):
            deleted[rollup.__tablename__] = delete(rollup, rollup.bucket_start < long_cutoff)
        deleted["query_stalls"] = delete(QueryStall, QueryStall.detected_at < long_cutoff)
        # An ended run stored years ahead (an older writer) is dated now, when first seen
        # here: due a retention later instead of never.
        lost.bring_back_ahead(conn, now, ended=True)
        deleted["query_runs"] = delete(QueryRun, sa.and_(
            QueryRun.last_event_at < long_cutoff,
            ~sa.exists().where(Batch.run_id == QueryRun.run_id),
        ))
        # Claims more than a day ahead: a replica's clock that jumped ahead, before the runner
        # took the database's then (leases.py); each held its slot off for every replica.
        deleted["job_runs"] = delete(JobRun, (JobRun.slot < now - JOB_RUNS_KEPT)
                                     | (JobRun.slot > now + JOB_RUNS_KEPT))
        if busy is not None:
            raise Deferred(f"partition steps left for the next run: {busy}")
        return deleted


def _partition_steps(conn: sa.Connection, now: datetime, raw_cutoff: datetime,
                     commit: Callable[[], None] | None) -> dict[str, int]:
    """The due days dropped (before their rows waiting in DEFAULT would be moved out only to
    go), then the next days' partitions created; one held up leaves the rest, which needs the
    same lock, to the next run. The days ahead (:data:`~.partitions.DAYS_AHEAD`) are the margin
    for a creation held up: every run tries again, and a day still without its partition when it
    comes takes its rows in DEFAULT, moved out by the next creation."""
    dropped = partitions.drop_before(conn, raw_cutoff, commit)
    partitions.ensure_ahead(conn, now, commit=commit, on_busy="raise")
    return dropped


class _Deleter:
    """Deletes in one statement, or (with ``commit``) in bounded transactions: up to
    :data:`CHUNK_ROWS` rows each, halved each time the disk is too full for one."""

    def __init__(self, conn: sa.Connection, commit: Callable[[], None] | None) -> None:
        self._conn, self._commit = conn, commit
        self._rows = CHUNK_ROWS

    def __call__(self, model: type, condition: sa.ColumnElement[bool]) -> int:
        if self._commit is None:
            return self._conn.execute(sa.delete(model).where(condition)).rowcount
        rowid: sa.ColumnClause[int] = sa.literal_column("rowid", sa.Integer)

        def chunk(rows: int) -> int:
            some = sa.select(rowid).select_from(model).where(condition).limit(rows)
            return self._conn.execute(
                sa.delete(model).where(rowid.in_(some.scalar_subquery()))).rowcount
        return self._chunks(chunk)

    def batches_before(self, cutoff: datetime) -> int:
        if self._commit is None:
            return counts.delete_batches_before(self._conn, cutoff)
        return self._chunks(lambda rows: counts.delete_batches_before(self._conn, cutoff, rows))

    def _chunks(self, chunk: Callable[[int], int]) -> int:
        assert self._commit is not None
        total = 0
        while True:
            try:
                n = chunk(self._rows)
                self._commit()
            except sa.exc.OperationalError as exc:
                if not _disk_full(exc) or self._rows == 1:
                    raise
                # Only this chunk is undone (the claim and earlier chunks are committed).
                self._conn.rollback()
                self._rows //= 2
                continue
            total += n
            if n < self._rows:
                return total


def _disk_full(exc: sa.exc.OperationalError) -> bool:
    return getattr(exc.orig, "sqlite_errorname", None) == "SQLITE_FULL"
