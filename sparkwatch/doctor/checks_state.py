"""State that can never be evicted: no watermark, a watermark on a column that is not a key,
dropDuplicates without a watermark, a stream-stream join without event-time bounds, arbitrary
stateful processing that never removes state.

The plan says why eviction is impossible; the progress shows the consequence (rows growing with
nothing removed). A cause without growth yet (a small key space) is reported with lower severity.
"""

from __future__ import annotations

from sparkwatch.doctor.evidence import Growth, growth
from sparkwatch.doctor.findings import event_time_column, finding, keys_code
from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.plan.model import OperatorIdentity

KEYED = ("aggregation", "session_window", "dedupe")
ARBITRARY = (
    "flat_map_groups_with_state",
    "apply_in_pandas_with_state",
    "transform_with_state",
    "transform_with_state_in_pandas",
    "transform_with_state_in_pyspark",
)


def check_unbounded_state(record: QueryRecord) -> list[Finding]:
    out = []
    for index, points in sorted(record.operators.items()):
        op, g = record.identity(index), growth(points)
        if op.kind == "stream_stream_join" and op.node is not None:
            found = _join(record, op, g)
        elif op.kind in KEYED and op.node is not None:
            found = _keyed(record, op, g)
        elif g.growing and op.kind != "global_limit":
            found = _growing(record, op, g)
        else:
            found = None
        if found is not None:
            out.append(found)
    return out


def _fitted(g: Growth) -> dict[str, float]:
    """The fitted rate and its confidence, for JSON consumers."""
    return {"rows_per_batch": round(g.per_batch, 3), "r_squared": round(g.fit.r_squared, 3)}


def _severity(g: Growth) -> Severity:
    return Severity.ERROR if g.growing else Severity.INFO


def _keyed(record: QueryRecord, op: OperatorIdentity, g: Growth) -> Finding | None:
    if op.output_mode == "complete":
        return None  # complete mode keeps every group by definition: nothing to fix here
    if not op.watermarks:
        cause = "no withWatermark() upstream of the operator, so Spark never evicts its state"
        code = f"{'dedupe' if op.kind == 'dedupe' else 'aggregation'}-without-watermark"
        fix = _dedupe_fix(op) if op.kind == "dedupe" else _aggregation_fix(op)
    elif not op.event_time_keys:
        cause = (
            f"the watermark is on {op.watermark_column}, which is not among the keys "
            f"[{', '.join(op.keys)}]: it filters late rows but cannot evict state"
        )
        code = "watermark-not-on-key"
        fix = _dedupe_fix(op) if op.kind == "dedupe" else _aggregation_fix(op)
    else:
        return None
    title = "state grows without bound" if g.growing else "state can never be evicted"
    return finding(
        record, code, _severity(g), title, [g.text(), cause], fix, op,
        (g.first_batch, g.last_batch), rows_first=g.first_rows, rows_last=g.last_rows,
        rows_removed=g.removed, **_fitted(g),
    )


def _aggregation_fix(op: OperatorIdentity) -> str:
    col = event_time_column(op)
    return (
        f'Declare how late data may be and group by an event-time window: '
        f'df.withWatermark("{col}", "10 minutes").groupBy(F.window("{col}", "5 minutes"), '
        f'{keys_code(op.keys)}) (update or append mode); Spark then drops a window\'s state once '
        f"the watermark passes its end."
    )


def _dedupe_fix(op: OperatorIdentity) -> str:
    col = event_time_column(op)
    return (
        f'Bound the deduplication in event time: df.withWatermark("{col}", "10 minutes")'
        f'.dropDuplicatesWithinWatermark([{keys_code(op.keys)}]) (Spark 3.5+), or keep '
        f'dropDuplicates([{keys_code(op.keys)}, "{col}"]) with the watermarked column among the '
        f"keys."
    )


def _join(record: QueryRecord, op: OperatorIdentity, g: Growth) -> Finding | None:
    cleanup = op.details.get("state_cleanup") or {}
    never = [side for side in ("left", "right") if cleanup.get(side) is None]
    if not never:
        return None
    sides = " and ".join(never)
    marks = op.details.get("side_watermarks") or {}
    watermarked = ", ".join(f"{s}: {', '.join(c) or 'none'}" for s, c in sorted(marks.items()))
    evidence = [
        g.text(),
        f"Spark evicts no join state on the {sides} side{'s' if len(never) > 1 else ''} "
        f"(no watermark plus time-range condition; watermarks {watermarked or 'none'})",
    ]
    severity = Severity.ERROR if g.growing and len(never) == 2 else Severity.WARNING
    fix = (
        'Watermark both inputs and bound the match in event time, e.g. '
        'left.withWatermark("ts", "10 minutes").alias("l").join(right.withWatermark("ts", '
        '"10 minutes").alias("r"), F.expr("l.key = r.key AND r.ts BETWEEN l.ts AND l.ts + '
        'interval 1 hour")); outer joins need both to emit unmatched rows at all.'
    )
    return finding(
        record, "join-without-time-bounds", severity, "join state is kept forever", evidence,
        fix, op, (g.first_batch, g.last_batch), rows_first=g.first_rows, rows_last=g.last_rows,
        sides_never_evicted=never, **_fitted(g),
    )


def _growing(record: QueryRecord, op: OperatorIdentity, g: Growth) -> Finding:
    if op.kind in ARBITRARY:
        fix = (
            "Remove state the function no longer needs: a GroupStateTimeout (EventTimeTimeout "
            "with withWatermark, or ProcessingTimeTimeout) and state.remove() for "
            "(flat)mapGroupsWithState / applyInPandasWithState, a TTLConfig on the state "
            "variables for transformWithState."
        )
        cause = "the operator's own code decides when state goes, and it removed none"
    else:
        fix = (
            "Read the operator's plan (attach sparkwatch in classic mode) to see its keys and "
            "watermark; add withWatermark() on an event-time column among its keys."
        )
        cause = "the plan was not read, so the cause is not known"
    return finding(
        record, "state-growing-without-removals", Severity.WARNING, "state grows without bound",
        [g.text(), cause], fix, op, (g.first_batch, g.last_batch), rows_first=g.first_rows,
        rows_last=g.last_rows, rows_removed=g.removed, **_fitted(g),
    )
