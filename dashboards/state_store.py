"""State store: per operator (name and index) size, growth, churn, timings, provider metrics."""

from __future__ import annotations

from typing import Any

from sparkwatch.dashboards import panels as p
from sparkwatch.dashboards import recording as r
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.promql import (
    BY_OPERATOR,
    OPERATOR_FILTER,
    OPERATOR_LEGEND,
    QUERY_FILTER,
    by,
    custom,
    rate,
    sel,
    total,
    with_identity,
)
from sparkwatch.dashboards.skeleton import prometheus_board
from sparkwatch.dashboards.tables import column_units, join_columns
from sparkwatch.metrics import catalogue as cat

UID = "sparkwatch-state-store"
TITLE = "State store"
DESCRIPTION = (
    "Per stateful operator: size, growth and projection, churn, timings, RocksDB and HDFS."
)
OP = OPERATOR_LEGEND
RI = "$__rate_interval"


def _op(metric: cat.MetricDef | str, extra: str = "") -> str:
    return by("max", BY_OPERATOR + extra, sel(metric, OPERATOR_FILTER))


def _rate(metric: cat.MetricDef, window: str = RI) -> str:
    return total(BY_OPERATOR, metric, rate(metric, window, OPERATOR_FILTER))


def _prom(expr: str, legend: str) -> Any:
    """A per-operator target whose legend names the operator's identity."""
    return p.prom(with_identity(expr, OPERATOR_FILTER), legend)


def _per_operator(title: str, description: str, expr: str, unit: str) -> Any:
    """A third of a row: one line per state operator."""
    return p.graph(title, description, [_prom(expr, OP)], unit, width=8)


def per_batch(metric: cat.MetricDef) -> str:
    """Amount per micro-batch: the operator's counter over the query's batch counter (each
    source's pair matched, then one per operator)."""
    return by(
        "max",
        BY_OPERATOR,
        f"{rate(metric, RI, OPERATOR_FILTER)}\n/ ignoring (operator, operator_index) group_left\n"
        f"{rate(cat.QUERY_BATCHES, RI, QUERY_FILTER)}",
    )


def operators_table() -> Any:
    columns = {
        "Rows": _op(cat.STATE_ROWS),
        "Memory": _op(cat.STATE_MEMORY),
        "Bytes per row": f"{_op(cat.STATE_MEMORY)} / {_op(cat.STATE_ROWS)}",
        "Updated rows/s": _rate(cat.STATE_ROWS_UPDATED, "5m"),
        "Removed rows/s": _rate(cat.STATE_ROWS_REMOVED, "5m"),
        "Shuffle partitions": _op(cat.STATE_SHUFFLE_PARTITIONS),
        "Store instances": _op(cat.STATE_STORE_INSTANCES),
    }
    panel = p.grid(
        "Stateful operators now",
        "One row per stateful operator (operator_index is its position in Spark's "
        "stateOperators list, counted from the sink). Removed rows/s at 0 on a growing "
        "operator means nothing is ever evicted. Shuffle partitions are fixed by the first run "
        "of the checkpoint (spark.sql.shuffle.partitions); a join has 4 store instances per "
        "partition.",
        [p.prom(expr, instant=True, fmt="table") for expr in columns.values()],
        height=7,
    )
    panel = join_columns(panel, list(columns), hidden=("Time", "app_id"))
    return column_units(panel, {"Memory": "bytes", "Bytes per row": "bytes"})


def size_panels(config: Config) -> list[Any]:
    limit = config.alert("state_memory_filling_up").param("limit_bytes")
    return [
        p.graph(
            "State rows",
            "Rows in each operator's state. Healthy: a plateau or a saw tooth as windows close. "
            "A ramp that never bends is state without eviction (missing watermark, or a key "
            "space that keeps growing).",
            [_prom(_op(cat.STATE_ROWS), OP)],
        ),
        p.graph(
            "State memory",
            "Memory of each operator's state stores (all partitions). Red line: the configured "
            "limit of the memory alert. RocksDB keeps most state off-heap and on disk, so "
            "compare with the SST size below.",
            [_prom(_op(cat.STATE_MEMORY), OP)],
            "bytes",
            limit=limit,
        ),
        p.graph(
            "State growth (rows per hour, 1h trend)",
            "Linear trend of the state rows over the last hour, in rows per hour. Above zero for "
            "hours on end is the unbounded-state pattern: check the operator's watermark and "
            "the Rows removed panel.",
            [_prom(f"{_op(r.STATE_GROWTH)} * 3600", OP)],
        ),
        p.graph(
            "State memory projected 4h ahead",
            "Where the memory will be in 4 hours if the last hour's trend holds (predict_linear). "
            "Crossing the red line raises the memory alert; act before: add a watermark or TTL, "
            "or more executors.",
            [_prom(_op(r.MEMORY_PROJECTION), OP)],
            "bytes",
            limit=limit,
        ),
    ]


def churn_panels() -> list[Any]:
    return [
        p.graph(
            "Rows updated and removed per second",
            "State writes (updated) and evictions (removed) per second. Removals should follow "
            "updates at a delay equal to the watermark plus the window; none at all means "
            "eviction never happens.",
            [
                _prom(_rate(cat.STATE_ROWS_UPDATED), f"{OP} updated"),
                _prom(_rate(cat.STATE_ROWS_REMOVED), f"{OP} removed"),
            ],
            width=8,
        ),
        p.graph(
            "Late rows dropped by the watermark per second",
            "Input rows the operator discarded because they were older than the watermark. "
            "They are missing from the results: if that matters, raise the withWatermark delay.",
            [_prom(_rate(cat.STATE_ROWS_DROPPED), OP)],
            width=8,
        ),
        p.graph(
            "State time per batch",
            "Seconds per micro-batch spent updating, removing (evicting) and committing state. "
            "Commit dominates with slow checkpoint storage; removal with large scans for "
            "eviction.",
            [
                _prom(per_batch(cat.STATE_UPDATE_TIME), f"{OP} update"),
                _prom(per_batch(cat.STATE_REMOVAL_TIME), f"{OP} removal"),
                _prom(per_batch(cat.STATE_COMMIT_TIME), f"{OP} commit"),
            ],
            "s",
            stack=True,
            width=8,
        ),
    ]


def rocksdb_panels() -> list[Any]:
    def latency(calls: str, seconds: str) -> str:
        return f"{_rate(custom(seconds))}\n/\n{_rate(custom(calls))}"

    commit = {
        "flush": "rocksdbCommitFlushLatency",
        "compact": "rocksdbCommitCompactLatency",
        "checkpoint": "rocksdbCommitCheckpointLatency",
        "file sync": "rocksdbCommitFileSyncLatencyMs",
    }
    return [
        _per_operator(
            "RocksDB SST file size",
            "On-disk size of each operator's RocksDB state (all partitions). It grows with "
            "state rows; compaction reclaims deleted keys.",
            _op(custom("rocksdbSstFileSize")),
            "bytes",
        ),
        _per_operator(
            "RocksDB block cache hit ratio",
            "Share of block reads served by the block cache. Low values with a large state "
            "mean reads go to disk: raise spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB "
            "(or the bounded memory budget).",
            _op(r.CACHE_HIT_RATIO),
            "percentunit",
        ),
        p.graph(
            "RocksDB get and put latency",
            "Mean time of one get and one put call. Rising latency with a falling hit ratio "
            "points at memory pressure; with write stalls at compaction falling behind.",
            [
                _prom(latency("rocksdbGetCount", "rocksdbGetLatency"), f"{OP} get"),
                _prom(latency("rocksdbPutCount", "rocksdbPutLatency"), f"{OP} put"),
            ],
            "s",
            width=8,
        ),
        p.graph(
            "RocksDB compaction and write stalls",
            "Seconds per second spent compacting, and writers stalled because flushes or "
            "compactions fall behind. Stalls slow every batch: give RocksDB more write buffer "
            "or enable changelog checkpointing.",
            [
                _prom(_rate(custom("rocksdbTotalCompactionLatencyMs")), f"{OP} compaction"),
                _prom(_rate(custom("rocksdbWriterStallLatencyMs")), f"{OP} write stall"),
            ],
            "s",
            width=8,
        ),
        p.graph(
            "RocksDB commit time per batch",
            "Where a commit's time goes, per micro-batch: flushing memtables, compacting, the "
            "local checkpoint and syncing files to the checkpoint location (slow object stores "
            "show up as file sync).",
            [_prom(per_batch(custom(key)), f"{OP} {part}") for part, key in commit.items()],
            "s",
            stack=True,
            width=8,
        ),
        _per_operator(
            "RocksDB bytes copied to the checkpoint",
            "Bytes uploaded to the checkpoint location per second. Large uploads on every "
            "batch make commits slow; changelog checkpointing uploads only the changes.",
            _rate(custom("rocksdbBytesCopied")),
            "Bps",
        ),
    ]


def hdfs_and_other_panels() -> list[Any]:
    hits, misses = custom("loadedMapCacheHitCount"), custom("loadedMapCacheMissCount")
    return [
        _per_operator(
            "HDFS provider: loaded map cache hit ratio",
            "Share of state versions found in the executor's cache of loaded maps. Misses load "
            "the state from the checkpoint (after executor loss or rebalancing): frequent "
            "misses make batches slow.",
            f"{_op(hits)} / (({_op(hits)} + {_op(misses)}) > 0)",
            "percentunit",
        ),
        _per_operator(
            "HDFS provider: state size of the current version",
            "Size of the state map of the current version (snapshot size). The HDFS provider "
            "keeps it on the executor heap: compare with executor memory.",
            _op(custom("stateOnCurrentVersionSizeBytes")),
            "bytes",
        ),
        p.graph(
            "Per-instance metrics (lowest and highest)",
            "Custom metrics Spark reports per state store instance (e.g. SnapshotLastUploaded, "
            "the last snapshot version uploaded; -1 none yet). A lowest value far behind the "
            "highest is a store whose snapshots lag.",
            [
                _prom(_op(cat.STATE_INSTANCE_METRIC_MIN, ", metric"), f"{OP} {{{{metric}}}} min"),
                _prom(_op(cat.STATE_INSTANCE_METRIC_MAX, ", metric"), f"{OP} {{{{metric}}}} max"),
            ],
            width=8,
        ),
        p.grid(
            "Other custom metrics",
            "customMetrics keys this sparkwatch version has no dedicated metric for (new Spark "
            "releases add keys), last batch's raw value. Empty when every key is known.",
            [p.prom(_op(cat.STATE_CUSTOM_METRIC, ", metric"), instant=True, fmt="table")],
            height=6,
        ),
    ]


def build(config: Config) -> dict[str, Any]:
    return prometheus_board(UID, TITLE, DESCRIPTION, [
        ("Operators", [operators_table(), *size_panels(config)]),
        ("Churn and timings", churn_panels()),
        ("RocksDB provider", rocksdb_panels()),
        ("HDFS provider and other custom metrics", hdfs_and_other_panels()),
    ])
