"""Retention: raw per-batch rows for ``raw_days``; rollups, runs and stall marks for
``rollup_days``; job claims for a day.

Children go first and by their own (denormalized) timestamp, so nothing relies on SQLite having
foreign keys switched on; a batch and its operator/source/sink rows share one timestamp, so they
always go together.

On a partitioned history (PostgreSQL, migration 0010) raw rows go a whole day at a time: the job
drops the partitions of every day that ended before the cutoff (a day is kept until all of it is
due, so rows live up to a day longer than ``raw_days``), and creates the partitions of the next
days ahead of the writes (:mod:`sparkwatch.history.partitions`).
"""

from __future__ import annotations

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


@dataclass(frozen=True, slots=True)
class Retention:
    raw_days: float
    rollup_days: float

    def __call__(self, conn: sa.Connection, now: datetime) -> dict[str, int]:
        """Delete what is due; returns rows deleted per table."""
        raw_cutoff = now - timedelta(days=self.raw_days)
        long_cutoff = now - timedelta(days=self.rollup_days)
        deleted: dict[str, int] = {}
        if partitions.is_partitioned(conn):
            deleted.update(partitions.drop_before(conn, raw_cutoff))
            partitions.ensure_ahead(conn, now)
        else:
            for raw in (OperatorBatch, SourceBatch, SinkBatch):
                deleted[raw.__tablename__] = _delete(conn, raw, raw.timestamp < raw_cutoff)
            deleted["batches"] = counts.delete_batches_before(conn, raw_cutoff)
        for rollup in (QueryRollup, OperatorRollup):
            deleted[rollup.__tablename__] = _delete(conn, rollup, rollup.bucket_start < long_cutoff)
        deleted["query_stalls"] = _delete(conn, QueryStall, QueryStall.detected_at < long_cutoff)
        deleted["query_runs"] = _delete(conn, QueryRun, sa.and_(
            QueryRun.last_event_at < long_cutoff,
            ~sa.exists().where(Batch.run_id == QueryRun.run_id),
        ))
        deleted["job_runs"] = _delete(conn, JobRun, JobRun.slot < now - JOB_RUNS_KEPT)
        return deleted


def _delete(conn: sa.Connection, model: type, condition: sa.ColumnElement[bool]) -> int:
    return conn.execute(sa.delete(model).where(condition)).rowcount
