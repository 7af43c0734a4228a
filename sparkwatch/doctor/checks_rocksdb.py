"""RocksDB state stores: write stalls, a cold block cache, and a memory figure that bounded
memory makes unreliable (SPARK-48208, SPARK-53002)."""

from __future__ import annotations

from typing import Any

from sparkwatch.doctor.evidence import batch_range, count, seconds
from sparkwatch.doctor.findings import finding
from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.history.numbers import finite_number
from sparkwatch.history.views import StatePoint
from sparkwatch.plan.settings import BOUNDED_MEMORY, is_true

STALL_SHARE = 0.05
MIN_LOOKUPS = 10_000
LOW_HIT_RATIO = 0.5


def _total(points: tuple[StatePoint, ...], key: str) -> float:
    return sum((_metric(p.custom_metrics.get(key)) for p in points), 0.0)


def _metric(value: Any) -> float:
    """A custom metric as a count: Spark's are longs, but a history's JSON map may hold anything
    (the writer's "NaN" for a non-finite number, text, a SQLite NaN or 1e999, a number past any
    float); what is no finite number counts as none, where it ended doctor with a traceback."""
    number = finite_number(value)
    return 0.0 if number is None else float(number)


def _has(points: tuple[StatePoint, ...], key: str) -> bool:
    return any(key in p.custom_metrics for p in points)


def check_rocksdb(record: QueryRecord) -> list[Finding]:
    out: list[Finding] = []
    batch_ms = float(sum(b.duration_ms for b in record.batches)) or 1.0
    for index, points in sorted(record.operators.items()):
        if not _has(points, "rocksdbGetCount"):
            continue  # not a RocksDB store
        op = record.identity(index)
        span = (points[0].batch_id, points[-1].batch_id)
        stores = max(1, points[-1].num_shuffle_partitions)
        stalls = _total(points, "rocksdbWriterStallLatencyMs") / stores
        if stalls / batch_ms >= STALL_SHARE:
            out.append(finding(
                record, "rocksdb-write-stalls", Severity.WARNING, "RocksDB stalls writes",
                [f"writers stalled {seconds(stalls / 1000)} per store over "
                 f"{batch_range(*span)}, {stalls / batch_ms:.0%} of the batches' time"],
                "Give RocksDB room to flush before it stalls: raise "
                "spark.sql.streaming.stateStore.rocksdb.writeBufferSizeMB and "
                "spark.sql.streaming.stateStore.rocksdb.maxWriteBufferNumber (or "
                "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB under bounded memory).",
                op, span, stall_ms=stalls,
            ))
        hits = _total(points, "rocksdbReadBlockCacheHitCount")
        misses = _total(points, "rocksdbReadBlockCacheMissCount")
        if hits + misses >= MIN_LOOKUPS and hits / (hits + misses) < LOW_HIT_RATIO:
            ratio = hits / (hits + misses)
            out.append(finding(
                record, "rocksdb-cache-misses", Severity.INFO, "RocksDB block cache mostly misses",
                [f"{ratio:.0%} block cache hits ({count(hits)} hits, {count(misses)} misses) over "
                 f"{batch_range(*span)}"],
                "Give the block cache more memory: "
                "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB (or "
                "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB under bounded memory).",
                op, span, hits=hits, misses=misses, hit_ratio=ratio,
            ))
        if record.plan is not None and is_true(record.plan.settings, BOUNDED_MEMORY):
            out.append(finding(
                record, "memory-figure-unreliable", Severity.INFO,
                "memoryUsedBytes is unreliable under RocksDB bounded memory",
                [f"{BOUNDED_MEMORY}=true; the operator reports "
                 f"{count(points[-1].memory_used_bytes)} bytes in batch {points[-1].batch_id}, a "
                 f"figure known to be wrong in this mode (SPARK-48208, SPARK-53002)"],
                "Size state by rocksdbSstFileSize (spark_streaming_state_rocksdb_sst_file_size"
                "_bytes) and rocksdbPinnedBlocksMemoryUsage, and the shared budget by "
                "spark.sql.streaming.stateStore.rocksdb.maxMemoryUsageMB, not memoryUsedBytes.",
                op, span, memory_bytes=points[-1].memory_used_bytes,
            ))
    return out
