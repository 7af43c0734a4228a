"""Time series reads for the browser console: bounded, index-ordered range scans only.

Every read here is one ordered, limited range scan of an index that exists already (migration
0001 and 0004): ``batches (query_id, timestamp)``, ``operator_batches (query_id,
operator_index, timestamp)``, ``source_batches (query_id, source_index, timestamp)`` and the
primary key ``(run_id, batch_id, ...)`` of the child tables. None sorts or counts a whole query,
so a page costs the same with a thousand rows or a million.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sparkwatch.history.rollups import saturating_sum
from sparkwatch.history.schema import Batch, OperatorBatch, SourceBatch
from sparkwatch.history.views import StatePoint

BATCH_COLUMNS = (
    "timestamp", "run_id", "batch_id", "batch_duration_ms", "num_input_rows",
    "input_rows_per_second", "processed_rows_per_second", "duration_ms", "watermark",
)
OPERATOR_COLUMNS = tuple(StatePoint.__dataclass_fields__)
"""Every column of a :class:`StatePoint` (the field table's among them)."""
SOURCE_COLUMNS = ("timestamp", "run_id", "batch_id", "source_index", "description",
                  "end_offset", "latest_offset")


def _rows(conn: sa.Connection, stmt: sa.Select[Any]) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in conn.execute(stmt)]


def _newest(stmt: sa.Select[Any], table: Any, since: datetime | None,
            until: datetime | None, limit: int) -> sa.Select[Any]:
    """The newest ``limit`` rows of ``stmt`` in [since, until), by the index's time column."""
    t = table.c
    if since is not None:
        stmt = stmt.where(t.timestamp >= since)
    if until is not None:
        stmt = stmt.where(t.timestamp < until)
    # The index's own order alone: a tie-breaker column would make the database sort the range.
    return stmt.order_by(t.timestamp.desc()).limit(limit)


def batches(conn: sa.Connection, query_id: str, since: datetime | None = None,
            until: datetime | None = None, limit: int = 500,
            offset: int = 0) -> list[dict[str, Any]]:
    """The query's newest ``limit`` batches in the range (after skipping ``offset``), newest
    first: one range scan of ``(query_id, timestamp)``."""
    table = Batch.__table__
    stmt = sa.select(*(table.c[c] for c in BATCH_COLUMNS)).where(table.c.query_id == query_id)
    return _rows(conn, _newest(stmt, table, since, until, limit).offset(offset))


def operator_indexes(conn: sa.Connection, query_id: str, most: int | None = None) -> list[int]:
    """The query's operator positions (the first ``most``): one index probe per operator (a
    skip scan)."""
    ops = OperatorBatch.__table__.c
    found: list[int] = []
    while most is None or len(found) < most:
        stmt = sa.select(sa.func.min(ops.operator_index)).where(ops.query_id == query_id)
        if found:
            stmt = stmt.where(ops.operator_index > found[-1])
        index = conn.execute(stmt).scalar()
        if index is None:
            return found
        found.append(int(index))
    return found


def operator_series(conn: sa.Connection, query_id: str, operator: int,
                    since: datetime | None = None, until: datetime | None = None,
                    limit: int = 500) -> list[dict[str, Any]]:
    """One operator's newest ``limit`` rows in the range, newest first: one range scan of
    ``(query_id, operator_index, timestamp)``."""
    table = OperatorBatch.__table__
    stmt = sa.select(*(table.c[c] for c in OPERATOR_COLUMNS)).where(
        table.c.query_id == query_id, table.c.operator_index == operator)
    return _rows(conn, _newest(stmt, table, since, until, limit))


def source_series(conn: sa.Connection, query_id: str, since: datetime | None = None,
                  until: datetime | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Source 0's newest ``limit`` rows in the range (its offsets, for the backlog), newest
    first; other sources are read the same way by the caller when it needs them."""
    table = SourceBatch.__table__
    stmt = sa.select(*(table.c[c] for c in SOURCE_COLUMNS)).where(
        table.c.query_id == query_id, table.c.source_index == 0)
    return _rows(conn, _newest(stmt, table, since, until, limit))


def batches_at(conn: sa.Connection, keys: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """The batches (run_id, batch_id) of ``keys``, in one statement: a primary key probe each
    (one round trip for a page of queries instead of one per query)."""
    if not keys:
        return []
    b = Batch.__table__.c
    # OR of equalities, not a row-value IN: SQLite scans the whole table for the latter.
    stmt = sa.select(*(b[c] for c in BATCH_COLUMNS), b.query_id).where(
        sa.or_(*(sa.and_(b.run_id == run, b.batch_id == batch) for run, batch in keys)))
    return _rows(conn, stmt)


def runs_operators(conn: sa.Connection,
                   ranges: list[tuple[str, int, int]]) -> list[dict[str, Any]]:
    """State rows and memory (every operator's, summed) of each batch in the (run, first batch,
    last batch) ranges, in one statement: a primary key range scan each.

    The sums saturate at INT64_MAX as the rollups' do: the contract accepts each operator's
    value up to it, and SQLite's failed SUM would empty the console's overview for every app."""
    if not ranges:
        return []
    ops = OperatorBatch.__table__.c
    dialect = conn.dialect.name
    stmt = (sa.select(ops.run_id, ops.batch_id,
                      saturating_sum(dialect, ops.num_rows_total).label("num_rows_total"),
                      saturating_sum(dialect, ops.memory_used_bytes).label("memory_used_bytes"))
            .where(sa.or_(*(sa.and_(ops.run_id == run, ops.batch_id >= first,
                                    ops.batch_id <= last) for run, first, last in ranges)))
            .group_by(ops.run_id, ops.batch_id))
    return _rows(conn, stmt)
