"""Where state costs time: commit and update time against the batch, state stores against the
state they hold. State times are summed over all stores of a batch; divided by the stores they
approximate the wall time of a store's task when stores run in parallel (an underestimate when
there are fewer cores than stores, so the check errs on the quiet side)."""

from __future__ import annotations

from sparkwatch.doctor.evidence import batch_range, count, median, seconds
from sparkwatch.doctor.findings import finding
from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.history.views import StatePoint
from sparkwatch.plan.model import OperatorIdentity
from sparkwatch.plan.settings import PROVIDER

DOMINANT_SHARE = 0.5
MIN_BATCH_MS = 2000
"""Sub-second batches are dominated by fixed costs; tuning state does not pay there."""
MANY_STORES = 64
ROWS_PER_STORE_LOW = 1000
ROWS_PER_STORE_HIGH = 20_000_000
BYTES_PER_STORE_HIGH = 2 << 30
ROCKSDB_CLASS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def _steady(record: QueryRecord, points: tuple[StatePoint, ...]) -> list[StatePoint]:
    """Points after the run's first batch (planning and cold caches inflate it)."""
    first = record.batches[0].batch_id if record.batches else None
    return [p for p in points if p.batch_id != first]


def check_state_time(record: QueryRecord) -> list[Finding]:
    durations = {b.batch_id: b.duration_ms for b in record.batches}
    out = []
    for index, all_points in sorted(record.operators.items()):
        points = [p for p in _steady(record, all_points) if durations.get(p.batch_id)]
        if len(points) < 3:
            continue
        # Per store: the sums cover every store of the batch, which run in parallel.
        commit = median([p.commit_time_ms / max(1, p.num_shuffle_partitions) for p in points])
        update = median([(p.all_updates_time_ms + p.all_removals_time_ms)
                         / max(1, p.num_shuffle_partitions) for p in points])
        batch = median([durations[p.batch_id] for p in points])
        if batch < MIN_BATCH_MS or (commit + update) / batch < DOMINANT_SHARE:
            continue
        op = record.identity(index)
        first, last = points[0].batch_id, points[-1].batch_id
        evidence = [
            f"per state store, a median {seconds(commit / 1000)} committing and "
            f"{seconds(update / 1000)} updating of a median {seconds(batch / 1000)} batch "
            f"({(commit + update) / batch:.0%}) over {batch_range(first, last)}",
        ]
        out.append(
            finding(
                record, "state-time-dominates", Severity.WARNING,
                "state commit/update time dominates the batch", evidence,
                _time_fix(op, commit >= update), op, (first, last), commit_ms=commit,
                update_ms=update, batch_ms=batch,
            )
        )
    return out


def _time_fix(op: OperatorIdentity, commit: bool) -> str:
    if commit and op.state_store_provider == "rocksdb":
        return (
            "Commit only a changelog per batch instead of a snapshot: "
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true."
        )
    if op.state_store_provider == "hdfs":
        return (
            f"Use RocksDB for large state ({PROVIDER}={ROCKSDB_CLASS}, from a new checkpoint) "
            "with spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=true."
        )
    return (
        "Make each store's work smaller: more state stores (spark.sql.shuffle.partitions, from "
        "a new checkpoint) and a larger RocksDB block cache "
        "(spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB)."
    )


def check_store_count(record: QueryRecord) -> list[Finding]:
    out = []
    for index, points in sorted(record.operators.items()):
        last = points[-1]
        stores = max(1, last.num_shuffle_partitions)
        per_store = last.num_rows_total / stores
        memory = last.memory_used_bytes / stores
        op = record.identity(index)
        span = (points[0].batch_id, last.batch_id)
        if len(points) >= 3 and stores >= MANY_STORES and per_store < ROWS_PER_STORE_LOW:
            evidence = [
                f"{stores} state stores hold {count(last.num_rows_total)} rows "
                f"({per_store:.0f} per store) in batch {last.batch_id}; every store is a task, a "
                f"commit and checkpoint files in every batch",
            ]
            fix = (
                f"Start from a new checkpoint with fewer state stores: "
                f"spark.sql.shuffle.partitions={max(1, min(stores // 4, 32))} (a checkpoint "
                f"fixes the number of stores)."
            )
            out.append(finding(record, "too-many-state-stores", Severity.INFO,
                               "many state stores for little state", evidence, fix, op, span,
                               stores=stores, rows=last.num_rows_total))
        elif per_store > ROWS_PER_STORE_HIGH or memory > BYTES_PER_STORE_HIGH:
            evidence = [
                f"{stores} state stores hold {count(last.num_rows_total)} rows and "
                f"{count(last.memory_used_bytes)} bytes ({per_store:,.0f} rows, "
                f"{memory:,.0f} bytes per store) in batch {last.batch_id}",
            ]
            fix = (
                f"Spread state over more stores from a new checkpoint: "
                f"spark.sql.shuffle.partitions={stores * 4}; with RocksDB "
                f"({PROVIDER}={ROCKSDB_CLASS}) state leaves the JVM heap."
            )
            out.append(finding(record, "too-few-state-stores", Severity.WARNING,
                               "few state stores for much state", evidence, fix, op, span,
                               stores=stores, rows=last.num_rows_total,
                               memory_bytes=last.memory_used_bytes))
    return out
