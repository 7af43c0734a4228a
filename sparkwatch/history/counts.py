"""Each run's batch count (``query_runs.batches``), kept in step with the ``batches`` rows.

The writer adds the batches it inserts and retention subtracts the batches it deletes, in the
same transaction as the rows themselves, so the count is exact without reading ``batches``
(migration 0007 explains why listing queries must not count rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime

import sqlalchemy as sa

from sparkwatch.history.schema import Batch, QueryRun

_ADD = (
    sa.update(QueryRun)
    .where(QueryRun.run_id == sa.bindparam("counted_run_id"))
    .values(batches=QueryRun.batches + sa.bindparam("counted_batches"))
)

# PostgreSQL deletes and subtracts in one statement, whatever the number of rows deleted (a
# shortened retention may delete millions at once): one row per run comes back, not per batch.
_DELETE_AND_SUBTRACT = sa.text("""
WITH gone AS (DELETE FROM batches WHERE timestamp < :cutoff RETURNING run_id),
counted AS (SELECT run_id, count(*) AS n FROM gone GROUP BY run_id)
UPDATE query_runs SET batches = query_runs.batches - counted.n FROM counted
WHERE query_runs.run_id = counted.run_id
RETURNING counted.n
""")


def per_run(run_ids: Iterable[str]) -> Counter[str]:
    return Counter(run_ids)


def add(conn: sa.Connection, counts: Mapping[str, int]) -> None:
    """Add ``counts`` (negative to subtract) to their runs' batch counts."""
    params = [{"counted_run_id": run, "counted_batches": n} for run, n in counts.items() if n]
    if params:
        conn.execute(_ADD, params)


def delete_batches_before(conn: sa.Connection, cutoff: datetime, limit: int | None = None) -> int:
    """Delete the batches older than ``cutoff`` (at most ``limit`` of them: SQLite only, where
    retention deletes in bounded transactions) and subtract them from their runs; returns the
    number deleted. Their operator, source and sink rows must be deleted first (retention)."""
    if conn.dialect.name == "postgresql":
        if limit is not None:
            raise ValueError("limit: SQLite only (PostgreSQL drops whole partitions)")
        return sum(n for (n,) in conn.execute(_DELETE_AND_SUBTRACT, {"cutoff": cutoff}))
    due = Batch.timestamp < cutoff
    if limit is not None:
        rowid: sa.ColumnClause[int] = sa.literal_column("rowid", sa.Integer)
        due = rowid.in_(sa.select(rowid).select_from(Batch).where(due).limit(limit)
                        .scalar_subquery())
    stmt = sa.delete(Batch).where(due).returning(Batch.run_id)
    gone = per_run(conn.execute(stmt).scalars())
    add(conn, {run: -n for run, n in gone.items()})
    return sum(gone.values())
