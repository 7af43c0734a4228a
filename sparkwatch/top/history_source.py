"""`top` from the SQL history: each query's newest run, its last two batches (for growth)."""

from __future__ import annotations

import math
import time

from sparkwatch.doctor.history_source import load_records
from sparkwatch.doctor.model import QueryRecord
from sparkwatch.history.errors import HistoryError
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.views import StatePoint
from sparkwatch.plan.describe import summary
from sparkwatch.redact import redact_url
from sparkwatch.top.model import Snapshot, TopOperator, TopQuery


class NotANumber(ValueError):
    """A number column of the history holding something else (SQLite keeps whatever it is
    given: text, a blob); the message names the column."""


def read_history(url: str) -> Snapshot:
    try:
        with HistoryReader(url) as reader:
            status = reader.statuses()
        records = load_records(url, batches=2)
        # In here too: a row top cannot show is the history's fault, said on the screen (it
        # was a traceback that ended top).
        queries = [_query(r, status.get(r.query_id, "")) for r in records]
    except (HistoryError, NotANumber) as exc:  # our own words, the URL redacted
        return Snapshot(source=redact_url(url), taken_at=time.time(), error=str(exc))
    except Exception as exc:  # noqa: BLE001 - show why on screen and keep polling
        return Snapshot(source=redact_url(url), taken_at=time.time(),
                        error=f"{type(exc).__name__}: {exc}")
    return Snapshot(source=redact_url(url), taken_at=time.time(), queries=queries)


def _number(value: object, column: str, query_id: str) -> float | None:
    """A number of the history as top holds one; None (and NaN, an infinity: SQLite stores
    9e999 as one) as no value, as the metrics source shows them; anything else refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        shown = repr(value)
        raise NotANumber(f"{column} of query {query_id} holds "
                         f"{shown[:40] + '...' if len(shown) > 40 else shown}, not a number")
    number = float(value)
    return number if math.isfinite(number) else None


def _query(record: QueryRecord, status: str) -> TopQuery:
    last = record.batches[-1]
    qid = str(record.query_id)
    lag = None
    if last.watermark and last.watermark > 0:
        lag = last.timestamp - last.watermark
    elif last.event_time_max is not None:
        lag = last.timestamp - last.event_time_max
    duration = _number(last.duration_ms, "batches.batch_duration_ms", qid)
    query = TopQuery(
        app_id="",
        query_id=qid,
        name=str(record.name or ""),
        run_id=str(record.run_id),
        status="active" if status == "running" else status,
        batch_id=_number(last.batch_id, "batches.batch_id", qid),
        batch_seconds=None if duration is None else duration / 1000,
        lag_seconds=lag,
    )
    times = {b.batch_id: b.timestamp for b in record.batches}
    for index, points in sorted(record.operators.items()):
        query.operators.append(_operator(record, index, points, times))
    return query


def _operator(
    record: QueryRecord, index: int, points: tuple[StatePoint, ...], times: dict[int, float]
) -> TopOperator:
    identity = record.identity(index)
    p = points[-1]
    qid = str(record.query_id)

    def number(value: object, column: str) -> float | None:
        return _number(value, f"operator_batches.{column}", qid)

    commit_ms = number(p.commit_time_ms, "commit_time_ms")
    op = TopOperator(
        index=int(_number(index, "operator_batches.operator_index", qid) or 0),
        operator=str(p.operator_name),
        kind=identity.kind,
        identity=summary(identity) if identity.node is not None else "",
        rows=number(p.num_rows_total, "num_rows_total"),
        updated=number(p.num_rows_updated, "num_rows_updated"),
        removed=number(p.num_rows_removed, "num_rows_removed"),
        dropped=number(p.num_rows_dropped_by_watermark, "num_rows_dropped_by_watermark"),
        memory_bytes=number(p.memory_used_bytes, "memory_used_bytes"),
        commit_seconds=None if commit_ms is None else commit_ms / 1000,
    )
    if len(points) >= 2:
        prev = points[-2]
        before = number(prev.num_rows_total, "num_rows_total")
        elapsed = times.get(p.batch_id, 0.0) - times.get(prev.batch_id, 0.0)
        if elapsed > 0 and op.rows is not None and before is not None:
            op.growth = (op.rows - before) / elapsed
    return op
