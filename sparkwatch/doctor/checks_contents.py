"""Findings from a checkpoint's state contents (`doctor --inspect-state`): partitions and keys that
hold most of a store, rows the watermark should have evicted, and rows growing with nothing
removed in the change feed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from sparkwatch.doctor.evidence import count
from sparkwatch.doctor.model import Finding, Severity
from sparkwatch.state.model import Growth, OperatorReport, StateReport, StoreReport
from sparkwatch.state.skew import skew
from sparkwatch.terminal import fmt_bytes

SKEW_RATIO = 4.0
"""The largest partition holds at least this many times the median partition's bytes."""
HOT_SHARE = 0.25
"""A key owning this share of a store's bytes..."""
HOT_OVER_FAIR = 3.0
"""...and this many times its fair share (1 / keys): three even keys are not hot."""
MIN_ROWS = 100
"""Fewer rows in the largest partition or store are not worth tuning."""
GROWTH_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class Inspected:
    """One checkpoint's report with the recent growth of its stores (by operator id, label)."""

    report: StateReport
    growth: dict[tuple[int, str], Growth]
    error: str | None = None
    """Why the checkpoint could not be read (then the report is empty)."""

    @property
    def name(self) -> str:
        return PurePosixPath(self.report.checkpoint.rstrip("/")).name or self.report.checkpoint


def check_contents(inspected: Inspected) -> list[Finding]:
    if inspected.error is not None:
        return [_unreadable(inspected)]
    out = []
    for op, store in _stores(inspected.report):
        for check in (_partition_skew, _hot_key, _expired):
            found = check(inspected, op, store)
            if found is not None:
                out.append(found)
        g = inspected.growth.get((op.operator_id, store.target.label))
        if g is not None and (found := _growing(inspected, op, store, g)) is not None:
            out.append(found)
    return out


def _unreadable(inspected: Inspected) -> Finding:
    return Finding(
        code="state-unreadable", severity=Severity.ERROR, query_id=inspected.report.checkpoint,
        query_name=inspected.name, run_id="", title="the checkpoint's state cannot be read",
        evidence=(str(inspected.error),),
        fix=("Check the path (the checkpointLocation the query was started with) and its "
             "permissions; a corrupt or truncated file under offsets/, commits/ or state/ is "
             "named above: restore the checkpoint from a copy, or read an earlier batch with "
             "`sparkwatch state CHECKPOINT --batch-id N`."),
        numbers={"error": str(inspected.error)},
    )


def _stores(report: StateReport) -> Iterator[tuple[OperatorReport, StoreReport]]:
    for op in report.operators:
        for store in op.stores:
            yield op, store


def _finding(inspected: Inspected, op: OperatorReport, store: StoreReport, code: str,
             title: str, evidence: list[str], fix: str, **numbers: Any) -> Finding:
    where = f"operator {op.operator_id} {op.operator_name}, store {store.target.label}"
    batch = inspected.report.batch_id
    return Finding(
        code=code, severity=Severity.WARNING, query_id=inspected.report.checkpoint,
        query_name=inspected.name, run_id="", title=title,
        evidence=(f"{where} as of batch {batch}: {count(store.rows)} rows, "
                  f"{fmt_bytes(store.bytes)}", *evidence),
        fix=fix, operator_index=op.operator_id, operator=op.operator_name,
        batches=None if batch is None else (batch, batch),
        numbers={"store": store.target.label, **numbers},
    )


def _partition_skew(inspected: Inspected, op: OperatorReport,
                    store: StoreReport) -> Finding | None:
    sk = skew(store.partitions)
    if sk.ratio < SKEW_RATIO or sk.max_rows < MIN_ROWS:
        return None
    named = ", ".join(f"{p.partition_id} ({count(p.rows)} rows, {fmt_bytes(p.bytes)})"
                      for p in sk.worst)
    evidence = [
        f"the largest partition holds {fmt_bytes(sk.max_bytes)}, {sk.ratio:.1f}x the median "
        f"partition's {fmt_bytes(sk.median_bytes)}; largest partitions: {named}",
        "each partition's state is one task per batch: the largest sets the batch's duration "
        "and its store needs the most memory while the other cores wait",
    ]
    fix = (
        "Spread the hot keys: salt them (add F.floor(F.rand() * 8).alias(\"salt\") to the key; "
        "an aggregation then combines the salted partial results in a second step, a join "
        "repeats the other side's rows for each salt value), or key the state by a finer column; "
        "more shuffle partitions do not split a single hot key."
    )
    return _finding(inspected, op, store, "state-partition-skew",
                    "state is skewed across partitions", evidence, fix,
                    skew_ratio=round(sk.ratio, 2),
                    partitions=[p.partition_id for p in sk.worst])


def _hot_key(inspected: Inspected, op: OperatorReport, store: StoreReport) -> Finding | None:
    if not store.top_keys or store.keys < 2 or store.rows < MIN_ROWS:
        return None
    top = store.top_keys[0]
    share = top.bytes / max(1, store.bytes)
    if share < HOT_SHARE or share < HOT_OVER_FAIR / store.keys:
        return None
    evidence = [
        f"key {top.key} owns {share:.0%} of the store's bytes ({count(top.rows)} rows, "
        f"{fmt_bytes(top.bytes)}) among {count(store.keys)} keys",
        "one key's state lives in one partition: it cannot be spread over more tasks, and "
        "every batch that touches it waits for that task",
    ]
    fix = (
        f"Salt the key (key by it plus F.floor(F.rand() * 8) and combine the partial results in "
        f"a second step, or for a join repeat the other side's rows for each salt), or filter or "
        f"route {top.key} separately if it is a placeholder (null, 'unknown', a test account)."
    )
    return _finding(inspected, op, store, "state-hot-key", "one key holds most of the state",
                    evidence, fix, key=top.key, share_of_bytes=round(share, 4))


def _expired(inspected: Inspected, op: OperatorReport, store: StoreReport) -> Finding | None:
    if not store.expired_rows:
        return None
    evidence = [
        f"{count(store.expired_rows)} rows have an event time ({store.time_field}) behind the "
        f"watermark ({inspected.report.watermark_ms} ms) and are still in the store",
        "Spark evicts such rows in append and update mode; kept, they cost memory and "
        "checkpoint size on every batch and never leave",
    ]
    fix = (
        "Use append or update output mode (complete mode keeps every group forever) with "
        "withWatermark() on the key's event-time column; for transformWithState set a TTLConfig "
        "on the state variables."
    )
    return _finding(inspected, op, store, "state-behind-watermark",
                    "state the watermark should have evicted is still there", evidence, fix,
                    rows_behind_watermark=store.expired_rows)


def _growing(inspected: Inspected, op: OperatorReport, store: StoreReport,
             g: Growth) -> Finding | None:
    grew = g.rows_to - g.rows_from
    if g.changes.removes or grew < MIN_ROWS or grew < GROWTH_SHARE * max(1, g.rows_to):
        return None
    c = g.changes
    evidence = [
        f"rows grew from {count(g.rows_from)} (batch {c.from_batch - 1}) to "
        f"{count(g.rows_to)} (batch {c.to_batch}); the change feed recorded {count(c.puts)} "
        f"puts and no removal",
        "state that is only ever added to grows until the executors run out of memory or the "
        "checkpoint's state files dominate every batch",
    ]
    fix = (
        "Give the state an end: withWatermark() on an event-time column among the keys, "
        "dropDuplicatesWithinWatermark instead of dropDuplicates, a GroupStateTimeout or a "
        "TTLConfig for arbitrary state."
    )
    return _finding(inspected, op, store, "state-growing-in-change-feed",
                    "state only grows between batches", evidence, fix,
                    rows_from=g.rows_from, rows_to=g.rows_to, puts=c.puts)
