"""Doctor's input from the SQL history: per query, the newest run that has batches."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from sparkwatch.doctor.model import BatchPoint, QueryRecord
from sparkwatch.history.engine import READ_LOCK_SECONDS, connect, create_engine
from sparkwatch.history.errors import NotANumber
from sparkwatch.history.interruptible import stops_for_signals
from sparkwatch.history.numbers import finite_number
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.revision import check_schema
from sparkwatch.history.schema import Batch, OperatorBatch, QueryRun
from sparkwatch.history.views import STATE_POINT_NUMBERS, StatePoint, state_point
from sparkwatch.summary import quoted

DEFAULT_BATCHES = 200


def load_records(
    url: str, query: str | None = None, batches: int = DEFAULT_BATCHES,
    skipped: list[NotANumber] | None = None,
) -> list[QueryRecord]:
    """Every query (or one, by id, name or id prefix), newest activity first.

    A row holding no finite number where one belongs is :class:`NotANumber`; with ``skipped``
    that query is left out instead and its error appended there (``top`` shows the others)."""
    with HistoryReader(url) as reader:
        ids = [reader.resolve_query(query)] if query else list(reader.statuses())
        engine = create_engine(url, must_exist=True, lock_seconds=READ_LOCK_SECONDS)
        records: list[QueryRecord | None] = []
        try:
            # Its own connection, stopped by Ctrl-C mid-statement as the reader's are.
            with connect(engine) as conn, stops_for_signals(conn):
                check_schema(conn)
                for qid in ids:
                    try:
                        records.append(_record(conn, reader, qid, batches))
                    except NotANumber as exc:
                        if skipped is None:
                            raise
                        skipped.append(exc)
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
    points = tuple(_batch_point(r, query_id) for r in _batches(conn, run.run_id, limit))
    plans = reader.plans(query_id, run.run_id)
    return QueryRecord(
        query_id=query_id,
        name=run.name,
        run_id=run.run_id,
        batches=points,
        operators=_operators(conn, query_id, run.run_id, points[0].batch_id),
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


def _number(value: Any, column: str, query_id: str) -> Any:
    """A number column's value, checked where it is read, once for every reader of the records
    (doctor, top, the console's findings): text (SQLite keeps 'lots' in an INTEGER column), NaN
    or an infinity made doctor's arithmetic a traceback. No field of a point may be absent (the
    columns are NOT NULL), so such a value is an error naming the column, not "no value"."""
    number = finite_number(value)
    if number is None:
        raise NotANumber(f"{column} of query {query_id} holds {quoted(value, 40)}, not a finite "
                         f"number", query_id)
    return number


def _batch_point(row: Any, query_id: str) -> BatchPoint:
    return BatchPoint(
        batch_id=_number(row.batch_id, "batches.batch_id", query_id),
        timestamp=row.timestamp.timestamp(),
        duration_ms=_number(row.batch_duration_ms, "batches.batch_duration_ms", query_id),
        input_rows=_number(row.num_input_rows, "batches.num_input_rows", query_id),
        event_time_min=_epoch(row.event_time_min),
        event_time_max=_epoch(row.event_time_max),
        watermark=_epoch(row.watermark),
    )


def _operators(
    conn: sa.Connection, query_id: str, run_id: str, first_batch: int
) -> dict[int, tuple[StatePoint, ...]]:
    o = OperatorBatch.__table__.c
    stmt = (
        sa.select(OperatorBatch.__table__)
        .where(o.run_id == run_id, o.batch_id >= first_batch)
        .order_by(o.operator_index, o.batch_id)
    )
    out: dict[int, list[StatePoint]] = {}
    for row in conn.execute(stmt):
        point = state_point({**row._mapping, **{
            name: _number(row._mapping[name], f"operator_batches.{name}", query_id)
            for name in STATE_POINT_NUMBERS}})
        out.setdefault(point.operator_index, []).append(point)
    return {index: tuple(points) for index, points in out.items()}
