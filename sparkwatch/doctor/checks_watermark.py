"""Watermark delay against the lateness the data actually shows: late rows dropped (delay too
small) and state kept far longer than any row was late (delay too large)."""

from __future__ import annotations

from sparkwatch.doctor.evidence import (
    batch_range,
    count,
    estimated_delay_ms,
    lateness,
    seconds,
    watermark_text,
)
from sparkwatch.doctor.findings import event_time_column, finding
from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.metrics.catalogue import STATE_ROWS_DROPPED
from sparkwatch.plan.describe import delay_text

ERROR_SHARE = 0.10
"""Dropping more than this share of the input of the affected batches is an error."""
EXCESSIVE_FACTOR = 10
EXCESSIVE_MIN_MS = 10 * 60_000
MIN_DATA_BATCHES = 5


def check_late_rows(record: QueryRecord) -> list[Finding]:
    out = []
    for index, points in sorted(record.operators.items()):
        dropped = [p for p in points if p.num_rows_dropped_by_watermark > 0]
        if not dropped:
            continue
        op = record.identity(index)
        first, last = dropped[0].batch_id, dropped[-1].batch_id
        total = sum(p.num_rows_dropped_by_watermark for p in dropped)
        affected = {p.batch_id for p in dropped}
        inputs = sum(b.input_rows for b in record.batches if b.batch_id in affected)
        share = total / inputs if inputs else 0.0
        delay_ms = op.watermark_delay_ms or estimated_delay_ms(record.batches)
        late = lateness(record.batches)
        evidence = [
            f"{count(total)} rows dropped as later than the watermark in {len(dropped)} of "
            f"{len(points)} batches ({batch_range(first, last)}), {share:.1%} of their "
            f"{count(inputs)} input rows (Spark counts them after partial aggregation)",
            f"the watermark delay is {delay_text(delay_ms)}",
        ]
        target = delay_ms / 1000 if delay_ms else 0.0
        if late is not None:
            evidence.append(
                f"rows arrived up to {seconds(late.seconds)} behind the newest event time "
                f"already seen (batch {late.batch_id})"
            )
            target = max(target, late.seconds)
        suggestion = watermark_text(target * 1.5)
        fix = (
            f'Wait longer for late rows: withWatermark("{event_time_column(op)}", '
            f'"{suggestion}") (state is then kept that much longer); or accept the loss and '
            f"alert on {STATE_ROWS_DROPPED.name}."
        )
        severity = Severity.ERROR if share > ERROR_SHARE else Severity.WARNING
        out.append(
            finding(
                record, "late-rows-dropped", severity, "late rows are dropped", evidence, fix,
                op, (first, last), rows_dropped=total, input_rows=inputs, share=share,
                delay_ms=delay_ms, lateness_seconds=None if late is None else late.seconds,
                suggested_delay=suggestion,
            )
        )
    return out


def check_excessive_delay(record: QueryRecord) -> list[Finding]:
    with_data = [b for b in record.batches if b.event_time_min is not None]
    late = lateness(record.batches)
    if len(with_data) < MIN_DATA_BATCHES or late is None:
        return []
    out = []
    for index, points in sorted(record.operators.items()):
        op = record.identity(index)
        delay_ms = op.watermark_delay_ms
        if delay_ms is None or delay_ms < EXCESSIVE_MIN_MS:
            continue
        if delay_ms < EXCESSIVE_FACTOR * max(late.seconds, 1.0) * 1000:
            continue
        if any(p.num_rows_dropped_by_watermark for p in points):
            continue
        first, last = with_data[0].batch_id, with_data[-1].batch_id
        evidence = [
            f"the watermark delay is {delay_text(delay_ms)}, but in {batch_range(first, last)} "
            f"no row arrived more than {seconds(late.seconds)} behind the newest event time",
            f"the operator holds {count(points[-1].num_rows_total)} state rows",
        ]
        suggestion = watermark_text(max(late.seconds * 2, 60))
        fix = (
            f'Keep state only as long as data is actually late: '
            f'withWatermark("{event_time_column(op)}", "{suggestion}") (Spark keeps each '
            f"window's state until the watermark, max event time - delay, passes its end)."
        )
        out.append(
            finding(
                record, "watermark-delay-excessive", Severity.INFO,
                "state is kept much longer than data is late", evidence, fix, op, (first, last),
                delay_ms=delay_ms, lateness_seconds=late.seconds, suggested_delay=suggestion,
            )
        )
    return out
