"""Rollups: per-minute and per-hour aggregates of the raw batch rows, kept after retention.

Each run recomputes every bucket that overlaps the recent ``lookback`` window from the raw rows
and upserts it, so a bucket converges to the exact aggregate of its batches, including batches
that arrived late (a spool replayed after a database outage) within the window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from sparkwatch.collector.leases import slot_of
from sparkwatch.history.schema import (
    HOUR,
    MINUTE,
    Batch,
    OperatorBatch,
    OperatorRollup,
    QueryRollup,
)

RESOLUTIONS = {MINUTE: 60, HOUR: 3600}


def bucket_of(conn: sa.Connection, column: Any, seconds: int) -> sa.ColumnElement[Any]:
    """Epoch seconds of the start of ``column``'s bucket, in the database's own dialect."""
    epoch: sa.ColumnElement[Any]
    if conn.dialect.name == "postgresql":
        epoch = sa.func.floor(sa.extract("epoch", column))
    else:
        epoch = sa.cast(sa.func.strftime("%s", column), sa.Integer)
    return (sa.cast(epoch, sa.BigInteger) // seconds * seconds).label("bucket")


def _query_aggregates(conn: sa.Connection, seconds: int, since: datetime) -> sa.Select[Any]:
    b = Batch.__table__.c
    bucket = bucket_of(conn, b.timestamp, seconds)
    return (
        sa.select(
            b.query_id, bucket,
            sa.func.count().label("batches"),
            sa.func.sum(b.num_input_rows).label("num_input_rows"),
            sa.func.sum(b.batch_duration_ms).label("batch_duration_ms_sum"),
            sa.func.max(b.batch_duration_ms).label("batch_duration_ms_max"),
        )
        .where(b.timestamp >= since)
        .group_by(b.query_id, bucket)
    )


def _operator_aggregates(conn: sa.Connection, seconds: int, since: datetime) -> sa.Select[Any]:
    o = OperatorBatch.__table__.c
    bucket = bucket_of(conn, o.timestamp, seconds)
    return (
        sa.select(
            o.query_id, o.operator_index, bucket,
            sa.func.max(o.operator_name).label("operator_name"),
            sa.func.count().label("batches"),
            sa.func.max(o.num_rows_total).label("num_rows_total_max"),
            sa.func.avg(o.num_rows_total).label("num_rows_total_avg"),
            sa.func.sum(o.num_rows_updated).label("num_rows_updated"),
            sa.func.sum(o.num_rows_removed).label("num_rows_removed"),
            sa.func.sum(o.num_rows_dropped_by_watermark).label("num_rows_dropped_by_watermark"),
            sa.func.max(o.memory_used_bytes).label("memory_used_bytes_max"),
            sa.func.sum(o.all_updates_time_ms).label("all_updates_time_ms"),
            sa.func.sum(o.all_removals_time_ms).label("all_removals_time_ms"),
            sa.func.sum(o.commit_time_ms).label("commit_time_ms"),
        )
        .where(o.timestamp >= since)
        .group_by(o.query_id, o.operator_index, bucket)
    )


_TEXT = {"query_id", "operator_name", "operator_index"}


def _rows(result: Iterable[Any], resolution: str) -> list[dict[str, Any]]:
    """Aggregates as rows; PostgreSQL's SUM/AVG of bigint come back as Decimal."""
    rows = []
    for row in result:
        values = dict(row._mapping)
        out: dict[str, Any] = {
            "bucket_start": datetime.fromtimestamp(int(values.pop("bucket")), tz=UTC),
            "resolution": resolution,
        }
        for key, value in values.items():
            if key in _TEXT:
                out[key] = value
            elif key == "num_rows_total_avg":
                out[key] = float(value)
            else:
                out[key] = int(value)
        rows.append(out)
    return rows


def _upsert(conn: sa.Connection, model: type, rows: list[dict[str, Any]], keys: list[str]) -> None:
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(model)
    update = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
    conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=update), rows)


@dataclass(frozen=True, slots=True)
class Rollups:
    lookback_seconds: float

    def __call__(self, conn: sa.Connection, now: datetime) -> int:
        """Recompute the buckets overlapping [now - lookback, now); returns rows upserted."""
        written = 0
        for resolution, seconds in RESOLUTIONS.items():
            since = slot_of(now - timedelta(seconds=self.lookback_seconds), seconds)
            queries = _rows(conn.execute(_query_aggregates(conn, seconds, since)), resolution)
            operators = _rows(conn.execute(_operator_aggregates(conn, seconds, since)), resolution)
            _upsert(conn, QueryRollup, queries, ["query_id", "resolution", "bucket_start"])
            _upsert(conn, OperatorRollup, operators,
                    ["query_id", "operator_index", "resolution", "bucket_start"])
            written += len(queries) + len(operators)
        return written
