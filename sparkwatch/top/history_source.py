"""`top` from the SQL history: each query's newest run, its last two batches (for growth)."""

from __future__ import annotations

import time

from sparkwatch.doctor.history_source import load_records
from sparkwatch.doctor.model import QueryRecord
from sparkwatch.history.errors import HistoryError
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.views import StatePoint
from sparkwatch.plan.describe import summary
from sparkwatch.redact import redact_url
from sparkwatch.top.model import Snapshot, TopOperator, TopQuery


def read_history(url: str) -> Snapshot:
    try:
        with HistoryReader(url) as reader:
            status = reader.statuses()
        records = load_records(url, batches=2)
    except HistoryError as exc:  # our own words, the URL redacted: no class name needed
        return Snapshot(source=redact_url(url), taken_at=time.time(), error=str(exc))
    except Exception as exc:  # noqa: BLE001 - show why on screen and keep polling
        return Snapshot(source=redact_url(url), taken_at=time.time(),
                        error=f"{type(exc).__name__}: {exc}")
    queries = [_query(r, status.get(r.query_id, "")) for r in records]
    return Snapshot(source=redact_url(url), taken_at=time.time(), queries=queries)


def _query(record: QueryRecord, status: str) -> TopQuery:
    last = record.batches[-1]
    lag = None
    if last.watermark and last.watermark > 0:
        lag = last.timestamp - last.watermark
    elif last.event_time_max is not None:
        lag = last.timestamp - last.event_time_max
    query = TopQuery(
        app_id="",
        query_id=record.query_id,
        name=record.name or "",
        run_id=record.run_id,
        status="active" if status == "running" else status,
        batch_id=last.batch_id,
        batch_seconds=last.duration_ms / 1000,
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
    op = TopOperator(
        index=index,
        operator=p.operator_name,
        kind=identity.kind,
        identity=summary(identity) if identity.node is not None else "",
        rows=p.num_rows_total,
        updated=p.num_rows_updated,
        removed=p.num_rows_removed,
        dropped=p.num_rows_dropped_by_watermark,
        memory_bytes=p.memory_used_bytes,
        commit_seconds=p.commit_time_ms / 1000,
    )
    if len(points) >= 2:
        prev = points[-2]
        elapsed = times.get(p.batch_id, 0.0) - times.get(prev.batch_id, 0.0)
        if elapsed > 0:
            op.growth = (p.num_rows_total - prev.num_rows_total) / elapsed
    return op
