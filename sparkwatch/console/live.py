"""The console's live points: the in-memory :class:`MetricState` (newer than the history, whose
writes are batched, and all there is when the history is switched off)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from sparkwatch.console.model import (
    FAILED,
    IDLE,
    RUNNING,
    SILENT,
    SILENT_SECONDS,
    TERMINATED,
    BatchRow,
    QueryDetail,
    QueryRow,
)
from sparkwatch.history.views import progress_points
from sparkwatch.metrics.state import MetricState, QueryState
from sparkwatch.model.events import QueryProgress

States = Callable[[str | None], Iterable[MetricState]]
"""The metric states a caller may see: the driver's one, or the collector's tenant(s)."""


def status_of(q: QueryState) -> str:
    if q.failed:
        return FAILED
    if not q.active:
        return TERMINATED
    return IDLE if q.idle else RUNNING


def snapshot(states: Iterable[MetricState]) -> list[QueryState]:
    out: list[QueryState] = []
    for state in states:
        with state.read() as (_, queries):
            out.extend(queries)
    return out


def batch_of(p: QueryProgress) -> BatchRow:
    return BatchRow(
        timestamp=p.timestamp, run_id=p.run_id, batch_id=p.batch_id,
        duration_ms=p.batch_duration_ms, input_rows=p.num_input_rows,
        input_rate=p.input_rows_per_second, processed_rate=p.processed_rows_per_second,
        phases=dict(p.duration_ms), watermark=p.event_time.watermark)


def merge_overview(rows: list[QueryRow], live: list[QueryState],
                   now: float | None = None) -> list[QueryRow]:
    """History rows updated with what the live state knows newer; live-only queries added;
    history-only "running" queries without an event (else a batch) for :data:`SILENT_SECONDS`
    marked silent."""
    now = time.time() if now is None else now
    known = {q.query_id for q in live}
    for r in rows:
        last = r.last_event_at if r.last_event_at is not None else r.last_batch_at
        if r.query_id not in known and r.status in (RUNNING, IDLE) and \
                (last is None or now - last > SILENT_SECONDS):
            r.status = SILENT
    by_id = {r.query_id: r for r in rows}
    for q in live:
        row = by_id.get(q.query_id)
        if row is None:
            row = by_id[q.query_id] = QueryRow(q.query_id, q.name or None, q.app.name,
                                               status_of(q))
            rows.append(row)
        row.status = status_of(q)
        if q.name:
            row.name = q.name
        p = q.last_progress
        if p is None or (row.last_batch_at is not None and p.timestamp < row.last_batch_at):
            continue
        b = batch_of(p)
        rows_total = sum(op.num_rows_total for op in p.state_operators)
        if row.last_batch_id != p.batch_id or not row.spark:
            row.spark.append(float(rows_total))
        row.input_rate, row.processed_rate = b.input_rate, b.processed_rate
        row.watermark_lag, row.last_batch_id, row.last_batch_at = (
            b.watermark_lag, b.batch_id, b.timestamp)
        if p.state_operators:
            row.state_rows = rows_total
            row.state_memory = sum(op.memory_used_bytes for op in p.state_operators)
    return rows


def merge_detail(detail: QueryDetail, q: QueryState | None) -> QueryDetail:
    """The live batch appended to the history's series when the history has not written it."""
    if q is None:
        return detail
    detail.status = status_of(q)
    p = q.last_progress
    if p is None:
        return detail
    last = detail.batches[-1] if detail.batches else None
    if last is None or (last.run_id, last.batch_id) != (p.run_id, p.batch_id) and \
            p.timestamp >= last.timestamp:
        detail.batches.append(batch_of(p))
        for op in progress_points(p):
            detail.operators.setdefault(op.operator_index, []).append(op)
            detail.operator_names.setdefault(op.operator_index, op.operator_name)
    for state_op in p.state_operators:
        known = q.identity(state_op)
        if known.node is not None and state_op.index not in detail.operator_names:
            detail.operator_names[state_op.index] = known.operator
    return detail


def live_detail(q: QueryState) -> QueryDetail:
    """A query page from the live state alone (no history configured)."""
    detail = QueryDetail(q.query_id, q.name or None, q.app.name, status_of(q), [], {}, {}, [],
                         [], [])
    detail.notes.append("no history configured: only the latest batch is shown")
    return merge_detail(detail, q)
