"""Retention: raw per-batch rows for ``raw_days``; rollups, runs and stall marks for
``rollup_days``; job claims for a day.

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
rows are gone already. PostgreSQL keeps one transaction (partitions dropped whole).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from sparkwatch.history import counts, partitions
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

    def in_chunks(self, conn: sa.Connection, now: datetime) -> dict[str, int]:
        """:meth:`__call__`, committing every :data:`CHUNK_ROWS` rows on SQLite (the
        connection's transaction must not be a context manager's: see
        :class:`~sparkwatch.collector.leases.ChunkedWork`)."""
        if conn.dialect.name != "sqlite":
            return self._delete_due(conn, now, None)
        # The slot's claim on its own first: a chunk the full disk refuses is rolled back alone.
        conn.commit()
        return self._delete_due(conn, now, conn.commit)

    def _delete_due(self, conn: sa.Connection, now: datetime,
                    commit: Callable[[], None] | None) -> dict[str, int]:
        delete = _Deleter(conn, commit)
        raw_cutoff = now - timedelta(days=self.raw_days)
        long_cutoff = now - timedelta(days=self.rollup_days)
        deleted: dict[str, int] = {}
        if partitions.is_partitioned(conn):
            deleted.update(partitions.drop_before(conn, raw_cutoff))
            partitions.ensure_ahead(conn, now)
        else:
            for raw in (OperatorBatch, SourceBatch, SinkBatch):
                deleted[raw.__tablename__] = delete(raw, raw.timestamp < raw_cutoff)
            deleted["batches"] = delete.batches_before(raw_cutoff)
        for rollup in (QueryRollup, OperatorRollup):
            deleted[rollup.__tablename__] = delete(rollup, rollup.bucket_start < long_cutoff)
        deleted["query_stalls"] = delete(QueryStall, QueryStall.detected_at < long_cutoff)
        deleted["query_runs"] = delete(QueryRun, sa.and_(
            QueryRun.last_event_at < long_cutoff,
            ~sa.exists().where(Batch.run_id == QueryRun.run_id),
        ))
        deleted["job_runs"] = delete(JobRun, JobRun.slot < now - JOB_RUNS_KEPT)
        return deleted


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
