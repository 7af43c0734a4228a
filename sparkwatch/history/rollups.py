"""Rollups: per-minute and per-hour aggregates of the raw batch rows, kept after retention.

Shared by the collector's scheduled job and the listener's history sink (a listener-only
deployment has no collector, and the History dashboard's fleet-wide panels read these rows), so
it imports nothing but SQLAlchemy, the schema, the field table and the contract's INT64_MAX.

Each run recomputes every bucket that overlaps the recent ``lookback`` window from the raw rows
and upserts it, so a bucket converges to the exact aggregate of its batches, including batches
that arrived late (a spool replayed after a database outage) within the window.

Day rollups are aggregated from the hour rollups just recomputed (a few dozen rows per query
instead of a day of raw rows every run): the History dashboard's panels over weeks read them.

Order statistics (a bucket's first and last state size, its batch-duration p95) are computed with
window functions that PostgreSQL and SQLite both have, so both backends store the same values:
the p95 is ``percentile_cont(0.95)`` (linear interpolation between the two nearest ranks), the
first/last are the values at the bucket's first/last batch by (timestamp, batch id, run id).

Rollup sums saturate at INT64_MAX (:func:`saturating_sum`): the contract accepts any count up to
it, so two batches can sum past what a BIGINT column holds, and one such bucket must not fail the
whole run, and every other query's rollups with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from sparkwatch.history.bounds import widen_from_recent
from sparkwatch.history.schema import (
    DAY,
    HOUR,
    MINUTE,
    Batch,
    JobRun,
    OperatorBatch,
    OperatorRollup,
    QueryRollup,
)
from sparkwatch.model.contract import INT64_MAX
from sparkwatch.model.fields import OPERATOR_FIELDS

RESOLUTIONS = {MINUTE: 60, HOUR: 3600}
DAY_SECONDS = 86400
JOB = "rollups"
# The collector's default lookback: late batches (a replayed spool) within it are rolled up.
LOOKBACK_SECONDS = 7200.0
CLAIMS_KEPT = timedelta(days=1)
# The percentile of batch durations kept per bucket, as an exact fraction (percent).
PERCENTILE = 95
QUERY_KEYS = ["query_id", "resolution", "bucket_start"]
OPERATOR_KEYS = ["query_id", "operator_index", "resolution", "bucket_start"]


def bucket_of(dialect: str, column: Any, seconds: int) -> sa.ColumnElement[Any]:
    """Epoch seconds of the start of ``column``'s bucket, in the database's own dialect."""
    epoch: sa.ColumnElement[Any]
    if dialect == "postgresql":
        epoch = sa.func.floor(sa.extract("epoch", column))
    else:
        epoch = sa.cast(sa.func.strftime("%s", column), sa.Integer)
    return (sa.cast(epoch, sa.BigInteger) // seconds * seconds).label("bucket")


def saturating_sum(dialect: str, column: Any) -> sa.ColumnElement[Any]:
    """SUM of ``column``, clamped to INT64_MAX instead of failing (see the module docstring)."""
    cap = sa.literal(INT64_MAX, sa.BigInteger)
    if dialect == "postgresql":
        # SUM(bigint) is numeric there, so it cannot overflow; the clamp makes it fit a BIGINT.
        return sa.cast(sa.func.least(sa.func.sum(column), cap), sa.BigInteger)
    # SQLite's SUM raises "integer overflow" when the group ends, whatever expression surrounds
    # it; TOTAL is a float that does not (exact below 2**53, far above any real bucket's sum),
    # and MIN compares it with the integer cap exactly, so the cast gets an in-range value.
    return sa.cast(sa.func.min(sa.func.total(column), cap), sa.BigInteger)


def query_aggregates(dialect: str, seconds: int, since: datetime) -> sa.Select[Any]:
    """One row per (query, bucket) from ``batches`` with timestamps from ``since``."""
    b = Batch.__table__.c
    bucket = bucket_of(dialect, b.timestamp, seconds)
    r = _ranked([b.query_id, bucket, b.num_input_rows, b.batch_duration_ms],
                [b.query_id, bucket], b.batch_duration_ms, b.timestamp >= since).c
    return (
        sa.select(
            r.query_id, r.bucket,
            sa.func.count().label("batches"),
            saturating_sum(dialect, r.num_input_rows).label("num_input_rows"),
            saturating_sum(dialect, r.batch_duration_ms).label("batch_duration_ms_sum"),
            sa.func.max(r.batch_duration_ms).label("batch_duration_ms_max"),
            _percentile(r.rank - 1, r.n, r.batch_duration_ms).label("batch_duration_ms_p95"),
        )
        .group_by(r.query_id, r.bucket)
    )


def _ranked(columns: list[Any], group: list[Any], order_by: Any,
            where: sa.ColumnElement[bool]) -> sa.Subquery:
    """``columns`` of the rows ``where`` selects, each with its 1-based ``rank`` by ``order_by``
    within its ``group`` and the group's size ``n`` (window functions both backends have)."""
    return (
        sa.select(
            *columns,
            sa.func.row_number().over(partition_by=group, order_by=order_by).label("rank"),
            sa.func.count().over(partition_by=group).label("n"),
        )
        .where(where)
        .subquery()
    )


def _first(r: Any, value: Any) -> sa.ColumnElement[Any]:
    """``value`` at the group's first row (rank 1) of a :func:`_ranked` subquery ``r``."""
    return sa.func.max(sa.case((r.rank == 1, value)))


def _last(r: Any, value: Any) -> sa.ColumnElement[Any]:
    """``value`` at the group's last row (rank n)."""
    return sa.func.max(sa.case((r.rank == r.n, value)))


def _percentile(rank: Any, n: Any, value: Any) -> sa.ColumnElement[Any]:
    """``percentile_cont(PERCENTILE / 100)`` of ``value`` within a group whose rows carry their
    0-based ``rank`` by ``value`` and the group size ``n``: the value at position
    p * (n - 1), interpolated between the ranks around it (integer arithmetic picks the ranks, so
    no float rounding moves them)."""
    position = (n - 1) * PERCENTILE
    low = position // 100
    fraction = sa.cast(position % 100, sa.Double) / 100.0
    at_low = sa.func.max(sa.case((rank == low, value)))
    at_high = sa.func.max(sa.case((rank == low + 1, value)))
    # at_high is NULL when the position is the last rank (fraction 0 then). Durations are never
    # negative (the contract), so at_high - at_low fits a BIGINT even at INT64_MAX.
    return at_low + sa.func.coalesce((at_high - at_low) * sa.func.max(fraction), 0.0)


def operator_aggregates(dialect: str, seconds: int, since: datetime) -> sa.Select[Any]:
    """One row per (query, operator, bucket) from ``operator_batches`` from ``since``."""
    o = OperatorBatch.__table__.c
    bucket = bucket_of(dialect, o.timestamp, seconds)
    r = _ranked([*(o[name] for name in _OPERATOR_COLUMNS), bucket],
                [o.query_id, o.operator_index, bucket], [o.timestamp, o.batch_id, o.run_id],
                o.timestamp >= since).c
    return (
        sa.select(
            r.query_id, r.operator_index, r.bucket,
            sa.func.max(r.operator_name).label("operator_name"),
            sa.func.count().label("batches"),
            sa.func.max(r.num_rows_total).label("num_rows_total_max"),
            sa.func.avg(r.num_rows_total).label("num_rows_total_avg"),
            _first(r, r.num_rows_total).label("num_rows_total_first"),
            _last(r, r.num_rows_total).label("num_rows_total_last"),
            *(saturating_sum(dialect, r[name]).label(name) for name in SUMMED),
            sa.func.max(r.memory_used_bytes).label("memory_used_bytes_max"),
        )
        .group_by(r.query_id, r.operator_index, r.bucket)
    )


def query_days(dialect: str, since: datetime) -> sa.Select[Any]:
    """One row per (query, day) from the hour rollups from ``since`` (no p95: see DAY)."""
    h = QueryRollup.__table__.c
    day = bucket_of(dialect, h.bucket_start, DAY_SECONDS)
    return (
        sa.select(
            h.query_id, day,
            saturating_sum(dialect, h.batches).label("batches"),
            saturating_sum(dialect, h.num_input_rows).label("num_input_rows"),
            saturating_sum(dialect, h.batch_duration_ms_sum).label("batch_duration_ms_sum"),
            sa.func.max(h.batch_duration_ms_max).label("batch_duration_ms_max"),
            sa.cast(sa.null(), sa.Double).label("batch_duration_ms_p95"),
        )
        .where(h.resolution == HOUR, h.bucket_start >= since)
        .group_by(h.query_id, day)
    )


def operator_days(dialect: str, since: datetime) -> sa.Select[Any]:
    """One row per (query, operator, day) from the hour rollups from ``since``: first/last are
    the first hour's first and the last hour's last, the mean is weighted by batches."""
    h = OperatorRollup.__table__.c
    day = bucket_of(dialect, h.bucket_start, DAY_SECONDS)
    r = _ranked([*(h[name] for name in _DAY_COLUMNS), day],
                [h.query_id, h.operator_index, day], h.bucket_start,
                sa.and_(h.resolution == HOUR, h.bucket_start >= since)).c
    return (
        sa.select(
            r.query_id, r.operator_index, r.bucket,
            sa.func.max(r.operator_name).label("operator_name"),
            saturating_sum(dialect, r.batches).label("batches"),
            sa.func.max(r.num_rows_total_max).label("num_rows_total_max"),
            # The numerator sums floats (a mean times a count), which overflow on neither backend.
            (sa.func.sum(r.num_rows_total_avg * r.batches)
             / saturating_sum(dialect, r.batches)).label("num_rows_total_avg"),
            _first(r, r.num_rows_total_first).label("num_rows_total_first"),
            _last(r, r.num_rows_total_last).label("num_rows_total_last"),
            *(saturating_sum(dialect, r[name]).label(name) for name in SUMMED),
            sa.func.max(r.memory_used_bytes_max).label("memory_used_bytes_max"),
        )
        .group_by(r.query_id, r.operator_index, r.bucket)
    )


SUMMED = tuple(f.attr for f in OPERATOR_FIELDS
               if f.counter and f.attr in OperatorRollup.__table__.c)
"""The field table's counters, summed per bucket: each one ``operator_rollups`` has a column
for (a new counter is rolled up once a migration gives it one; levels are aggregated by name
above, each as it means something: the state rows' max, mean, first and last, memory's max)."""
_OPERATOR_COLUMNS = ("query_id", "operator_index", "operator_name", "num_rows_total",
                     "memory_used_bytes", *SUMMED)
_DAY_COLUMNS = (
    "query_id", "operator_index", "operator_name", "bucket_start", "batches",
    "num_rows_total_max", "num_rows_total_avg", "num_rows_total_first", "num_rows_total_last",
    "memory_used_bytes_max", *SUMMED,
)
_TEXT = {"query_id", "operator_name", "operator_index"}
_FLOAT = {"num_rows_total_avg", "batch_duration_ms_p95"}


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
            if key in _TEXT or value is None:
                out[key] = value
            elif key in _FLOAT:
                out[key] = float(value)
            else:
                out[key] = int(value)
        rows.append(out)
    return rows


def _upsert(conn: sa.Connection, model: type, rows: list[dict[str, Any]], keys: list[str]) -> None:
    if not rows:
        return
    # In key order: two writers upserting overlapping buckets (a collector and a driver, or two
    # drivers) then wait for each other instead of deadlocking.
    rows.sort(key=lambda row: tuple(row[k] for k in keys))
    stmt = _dialect(conn).insert(model)
    update = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
    conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=update), rows)


def _dialect(conn: sa.Connection) -> Any:
    return postgresql if conn.dialect.name == "postgresql" else sqlite


def bucket_floor(moment: datetime, seconds: int) -> datetime:
    """The start of the bucket ``moment`` falls in, aligned to the epoch."""
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def recompute(conn: sa.Connection, now: datetime, lookback_seconds: float) -> int:
    """Recompute the buckets overlapping [now - lookback, now); returns rows upserted."""
    written = 0
    dialect = conn.dialect.name
    for resolution, seconds in RESOLUTIONS.items():
        since = bucket_floor(now - timedelta(seconds=lookback_seconds), seconds)
        queries = _rows(conn.execute(query_aggregates(dialect, seconds, since)), resolution)
        operators = _rows(conn.execute(operator_aggregates(dialect, seconds, since)), resolution)
        _upsert(conn, QueryRollup, queries, QUERY_KEYS)
        _upsert(conn, OperatorRollup, operators, OPERATOR_KEYS)
        written += len(queries) + len(operators)
    # The runs' batch bounds over the same window: a writer older than migration 0013 leaves
    # them short (see history/bounds.py).
    widen_from_recent(conn, now - timedelta(seconds=lookback_seconds))
    return written + _recompute_days(conn, now, lookback_seconds)


def _recompute_days(conn: sa.Connection, now: datetime, lookback_seconds: float) -> int:
    """The days overlapping the lookback, from their hour rollups (upserted just before)."""
    dialect = conn.dialect.name
    since = bucket_floor(now - timedelta(seconds=lookback_seconds), DAY_SECONDS)
    since = min(since, _days_missing_since(conn) or since)
    queries = _rows(conn.execute(query_days(dialect, since)), DAY)
    operators = _rows(conn.execute(operator_days(dialect, since)), DAY)
    _upsert(conn, QueryRollup, queries, QUERY_KEYS)
    _upsert(conn, OperatorRollup, operators, OPERATOR_KEYS)
    return len(queries) + len(operators)


def _days_missing_since(conn: sa.Connection) -> datetime | None:
    """The first day with hour rollups but no day rollup before the oldest day rollup, if any:
    a history upgraded to migration 0006 (day rollups backfilled once, from its hour rows). The
    oldest hours' day counts only when complete, as retention deletes a day's first hours (and
    its day row) before its last ones."""
    q = QueryRollup.__table__.c

    def oldest(resolution: str) -> datetime | None:
        stmt = sa.select(sa.func.min(q.bucket_start)).where(q.resolution == resolution)
        value: datetime | None = conn.execute(stmt).scalar()
        return value

    hour = oldest(HOUR)
    if hour is None:
        return None
    first_whole_day = bucket_floor(hour, DAY_SECONDS) + timedelta(days=1)
    day = oldest(DAY)
    if day is not None and day <= first_whole_day:
        return None
    return bucket_floor(hour, DAY_SECONDS)


def claim_slot(conn: sa.Connection, job: str, slot: datetime, replica: str,
               now: datetime) -> bool:
    """Claim ``(job, slot)`` in ``job_runs`` within the caller's transaction; False when another
    writer (collector replica or driver) has. See the collector's leases for why a row, not a
    lock."""
    row = {"job": job, "slot": slot, "replica": replica, "ran_at": now}
    stmt = (_dialect(conn).insert(JobRun).values(row).on_conflict_do_nothing()
            .returning(JobRun.job))
    # RETURNING, not rowcount: psycopg reports -1 for INSERT .. ON CONFLICT DO NOTHING.
    return conn.execute(stmt).first() is not None


def recompute_once_per_slot(conn: sa.Connection, now: datetime, interval_seconds: float,
                            replica: str, lookback_seconds: float = LOOKBACK_SECONDS) -> bool:
    """:func:`recompute`, unless a collector or another driver on this database already did for
    the current ``interval_seconds`` slot (the collector's job claims the same slots). ``now``
    is bounded by the database's clock already (:mod:`.clock`, as the writer's ``roll_up`` does):
    a clock that jumped ahead claimed slots that far ahead, each then found taken by every other
    writer, and deleted every claim before them."""
    epoch = now.timestamp()
    slot = datetime.fromtimestamp(epoch - epoch % interval_seconds, tz=UTC)
    if not claim_slot(conn, JOB, slot, replica, now):
        return False
    recompute(conn, now, lookback_seconds)
    # Without a collector nothing else deletes old claims (its retention job keeps a day).
    j = JobRun.__table__.c
    conn.execute(sa.delete(JobRun).where(j.job == JOB, j.slot < now - CLAIMS_KEPT))
    return True
