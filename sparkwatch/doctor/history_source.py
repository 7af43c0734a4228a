"""Doctor's input from the SQL history: per query, the newest run that has batches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from sparkwatch.doctor.model import BatchPoint, QueryRecord
from sparkwatch.history.engine import connect, create_engine
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.revision import check_schema
from sparkwatch.history.schema import Batch, OperatorBatch, QueryRun
from sparkwatch.history.views import StatePoint, state_point

DEFAULT_BATCHES = 200


def load_records(
    url: str, query: str | None = None, batches: int = DEFAULT_BATCHES
) -> list[QueryRecord]:
    """Every query (or one, by id, name or id prefix), newest activity first."""
    with HistoryReader(url) as reader:
        ids = [reader.resolve_query(query)] if query else list(reader.statuses())
        engine = create_engine(url, must_exist=True)
        try:
            with connect(engine) as conn:
                check_schema(conn)
                records = [_record(conn, reader, qid, batches) for qid in ids]
        finally:
            engine.dispose()
    return [r for r in records if r is not None]


def load_record(conn: sa.Connection, reader: HistoryReader, query_id: str,
                batches: int = DEFAULT_BATCHES) -> QueryRecord | None:
    """One query's record on a connection the caller holds (the console reads it per page)."""
    return _record(conn, reader, query_id, batches)


def _record(
    conn: sa.Connection, reader: HistoryReader, query_id: str, limit: int
) -> QueryRecord | None:
    run = _latest_run_with_batches(conn, query_id)
    if run is None:
        return None
    batch_rows = _batches(conn, run.run_id, limit)
    first = batch_rows[0].batch_id
    plans = reader.plans(query_id, run.run_id)
    return QueryRecord(
        query_id=query_id,
        name=run.name,
        run_id=run.run_id,
        batches=tuple(_batch_point(r) for r in batch_rows),
        operators=_operators(conn, run.run_id, first),
        plan=plans[0] if plans else None,
    )


def _latest_run_with_batches(conn: sa.Connection, query_id: str) -> Any:
    runs, batches = QueryRun.__table__.c, Batch.__table__.c
    has_batches = sa.exists().where(batches.run_id == runs.run_id)
    stmt = (
        sa.select(runs.run_id, runs.name)
        .where(runs.query_id == query_id, has_batches)
        .order_by(runs.last_event_at.desc(), runs.run_id.desc())
        .limit(1)
    )
    return conn.execute(stmt).first()


def _batches(conn: sa.Connection, run_id: str, limit: int) -> list[Any]:
    b = Batch.__table__.c
    stmt = sa.select(Batch.__table__).where(b.run_id == run_id)
    rows = conn.execute(stmt.order_by(b.batch_id.desc()).limit(limit)).all()
    return list(reversed(rows))


def _epoch(value: Any) -> float | None:
    return None if value is None else value.timestamp()


def _batch_point(row: Any) -> BatchPoint:
    return BatchPoint(
        batch_id=row.batch_id,
        timestamp=row.timestamp.timestamp(),
        duration_ms=row.batch_duration_ms,
        input_rows=row.num_input_rows,
        event_time_min=_epoch(row.event_time_min),
        event_time_max=_epoch(row.event_time_max),
        watermark=_epoch(row.watermark),
    )


def _operators(
    conn: sa.Connection, run_id: str, first_batch: int
) -> dict[int, tuple[StatePoint, ...]]:
    o = OperatorBatch.__table__.c
    stmt = (
        sa.select(OperatorBatch.__table__)
        .where(o.run_id == run_id, o.batch_id >= first_batch)
        .order_by(o.operator_index, o.batch_id)
    )
    out: dict[int, list[StatePoint]] = {}
    for row in conn.execute(stmt):
        out.setdefault(row.operator_index, []).append(state_point(_with_metrics_map(row)))
    return {index: tuple(points) for index, points in out.items()}


def _with_metrics_map(row: Any) -> Mapping[str, Any]:
    """The row with its custom metrics as a map: the writer stores a JSON object, but a SQLite
    history's column may hold any JSON (a list, a string, a number), and ``state_point``'s
    ``dict()`` of one ended doctor with a traceback, or with "database URL refused"."""
    metrics = row.custom_metrics
    return {**row._mapping, "custom_metrics": metrics if isinstance(metrics, Mapping) else {}}
