"""`top` from the SQL history: each query's newest run, its last two batches (for growth)."""

from __future__ import annotations

import time

from sparkwatch.doctor.history_source import load_records
from sparkwatch.doctor.model import QueryRecord
from sparkwatch.history.errors import HistoryError, NotANumber
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.views import StatePoint
from sparkwatch.plan.describe import summary
from sparkwatch.redact import redact_url
from sparkwatch.top.model import Snapshot, TopOperator, TopQuery


def read_history(url: str) -> Snapshot:
    source = redact_url(url)
    left_out: list[NotANumber] = []
    try:
        with HistoryReader(url) as reader:
            status = reader.statuses()
        # The loader checks every number it reads (text in an INTEGER column, an infinity) and,
        # given ``skipped``, leaves out only the query with such a row: one bad row hid every
        # query (the whole snapshot was its error).
        records = load_records(url, batches=2, skipped=left_out)
        queries = [_query(r, status.get(r.query_id, "")) for r in records]
    except HistoryError as exc:  # our own words, the URL redacted
        return Snapshot(source=source, taken_at=time.time(), error=str(exc))
    except Exception as exc:  # noqa: BLE001 - show why on screen and keep polling
        return Snapshot(source=source, taken_at=time.time(),
                        error=f"{type(exc).__name__}: {exc}")
    if left_out and not queries:  # nothing to show: why, as any other unreadable history
        return Snapshot(source=source, taken_at=time.time(), error=_why(left_out))
    note = None
    if left_out:
        note = f"{_queries(len(left_out))} left out: {_why(left_out)}"
    return Snapshot(source=source, taken_at=time.time(), queries=queries, note=note)


def _why(errors: list[NotANumber]) -> str:
    """One line however many queries were left out: the first one's reason, and how many more
    (a line per query would push the table off the screen)."""
    more = len(errors) - 1
    like = f" (and {more} more quer{'y' if more == 1 else 'ies'} like it)" if more else ""
    return str(errors[0]) + like


def _queries(n: int) -> str:
    return f"{n} quer{'y' if n == 1 else 'ies'}"


def _query(record: QueryRecord, status: str) -> TopQuery:
    # Every number of the record is a finite one: the loader refused the rest.
    last = record.batches[-1]
    lag = None
    if last.watermark and last.watermark > 0:
        lag = last.timestamp - last.watermark
    elif last.event_time_max is not None:
        lag = last.timestamp - last.event_time_max
    query = TopQuery(
        app_id="",
        query_id=str(record.query_id),
        name=str(record.name or ""),
        run_id=str(record.run_id),
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
        index=int(index),
        operator=str(p.operator_name),
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
