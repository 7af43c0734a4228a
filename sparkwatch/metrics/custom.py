"""Known ``customMetrics`` keys of state operators, mapped to proper metric names and units.

Spark adds keys with almost every release. Keys listed here get a dedicated metric; any other key
flows through :data:`catalogue.STATE_CUSTOM_METRIC`; per-instance keys
(``<metric>.partition_<p>_<store>``) are aggregated into the ``state_instance_metric_*`` families so
their cardinality stays bounded.

``per_batch`` keys are amounts of one batch (summed over the batch's tasks) and are exported as
counters accumulated across batches; the others are levels, exported as gauges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sparkwatch.metrics.catalogue import OPERATOR_LABELS, Kind, MetricDef, _def

MS = 0.001

INSTANCE_KEY = re.compile(
    r"^(?P<metric>[A-Za-z][A-Za-z0-9]*)\.partition_(?P<partition>\d+)_(?P<store>.+)$"
)


@dataclass(frozen=True, slots=True)
class CustomMetric:
    key: str
    metric: MetricDef
    scale: float
    provider: str
    """rocksdb, hdfs or operator (reported by the operator, whatever the provider)."""
    since: str = ""

    @property
    def per_batch(self) -> bool:
        return self.metric.kind is Kind.COUNTER


def _m(
    key: str, name: str, kind: Kind, help: str, provider: str, scale: float = 1.0, since: str = ""
) -> CustomMetric:
    metric = _def(f"state_{name}", kind, help, OPERATOR_LABELS, f"customMetrics.{key}")
    return CustomMetric(key, metric, scale, provider, since)


G, C = Kind.GAUGE, Kind.COUNTER
R, HD, OP = "rocksdb", "hdfs", "operator"

KNOWN: dict[str, CustomMetric] = {
    m.key: m
    for m in (
        # RocksDB provider: amounts of the batch's commits, summed over partitions.
        _m(
            "rocksdbGetLatency", "rocksdb_get_seconds_total", C, "Time in RocksDB get calls.", R, MS
        ),
        _m(
            "rocksdbPutLatency", "rocksdb_put_seconds_total", C, "Time in RocksDB put calls.", R, MS
        ),
        _m("rocksdbGetCount", "rocksdb_gets_total", C, "RocksDB get calls.", R),
        _m("rocksdbPutCount", "rocksdb_puts_total", C, "RocksDB put calls.", R),
        _m(
            "rocksdbCommitFlushLatency",
            "rocksdb_commit_flush_seconds_total",
            C,
            "Commit time flushing memtables.",
            R,
            MS,
        ),
        _m(
            "rocksdbCommitCompactLatency",
            "rocksdb_commit_compact_seconds_total",
            C,
            "Commit time compacting.",
            R,
            MS,
        ),
        _m(
            "rocksdbCommitCheckpointLatency",
            "rocksdb_commit_checkpoint_seconds_total",
            C,
            "Commit time taking the local checkpoint.",
            R,
            MS,
        ),
        _m(
            "rocksdbCommitFileSyncLatencyMs",
            "rocksdb_commit_file_sync_seconds_total",
            C,
            "Commit time syncing files to the checkpoint location.",
            R,
            MS,
        ),
        _m(
            "rocksdbCommitWriteBatchLatency",
            "rocksdb_commit_write_batch_seconds_total",
            C,
            "Commit time writing the write batch (3.4-3.5).",
            R,
            MS,
            "3.4",
        ),
        _m(
            "rocksdbCommitPauseLatency",
            "rocksdb_commit_pause_seconds_total",
            C,
            "Commit time pausing background work (3.4-3.5).",
            R,
            MS,
            "3.4",
        ),
        _m(
            "rocksdbFilesCopied",
            "rocksdb_files_copied_total",
            C,
            "Files copied to the checkpoint location.",
            R,
        ),
        _m(
            "rocksdbBytesCopied",
            "rocksdb_copied_bytes_total",
            C,
            "Bytes copied to the checkpoint location.",
            R,
        ),
        _m(
            "rocksdbFilesReused",
            "rocksdb_files_reused_total",
            C,
            "Files reused (not copied) at checkpoint.",
            R,
        ),
        _m(
            "rocksdbZipFileBytesUncompressed",
            "rocksdb_zip_file_uncompressed_bytes_total",
            C,
            "Uncompressed bytes of zipped checkpoint files.",
            R,
        ),
        _m(
            "rocksdbReadBlockCacheHitCount",
            "rocksdb_block_cache_hits_total",
            C,
            "Block cache hits on reads.",
            R,
        ),
        _m(
            "rocksdbReadBlockCacheMissCount",
            "rocksdb_block_cache_misses_total",
            C,
            "Block cache misses on reads.",
            R,
        ),
        _m("rocksdbTotalBytesRead", "rocksdb_read_bytes_total", C, "Bytes read by get calls.", R),
        _m(
            "rocksdbTotalBytesWritten",
            "rocksdb_written_bytes_total",
            C,
            "Bytes written by put calls.",
            R,
        ),
        _m(
            "rocksdbTotalBytesReadThroughIterator",
            "rocksdb_iterator_read_bytes_total",
            C,
            "Bytes read through iterators (eviction scans).",
            R,
        ),
        _m(
            "rocksdbWriterStallLatencyMs",
            "rocksdb_writer_stall_seconds_total",
            C,
            "Time writers were stalled by RocksDB (compaction or flush falling behind).",
            R,
            MS,
        ),
        _m(
            "rocksdbTotalCompactionLatencyMs",
            "rocksdb_compaction_seconds_total",
            C,
            "Time spent in compactions.",
            R,
            MS,
        ),
        _m(
            "rocksdbTotalBytesReadByCompaction",
            "rocksdb_compaction_read_bytes_total",
            C,
            "Bytes read by compactions.",
            R,
        ),
        _m(
            "rocksdbTotalBytesWrittenByCompaction",
            "rocksdb_compaction_written_bytes_total",
            C,
            "Bytes written by compactions.",
            R,
        ),
        _m(
            "rocksdbTotalBytesWrittenByFlush",
            "rocksdb_flush_written_bytes_total",
            C,
            "Bytes written by memtable flushes.",
            R,
            since="3.5",
        ),
        _m("rocksdbSstFileSize", "rocksdb_sst_file_size_bytes", G, "Size of live SST files.", R),
        _m(
            "rocksdbPinnedBlocksMemoryUsage",
            "rocksdb_pinned_blocks_memory_bytes",
            G,
            "Memory of blocks pinned in the block cache.",
            R,
            since="3.5",
        ),
        _m(
            "rocksdbNumInternalColFamiliesKeys",
            "rocksdb_internal_column_family_keys",
            G,
            "Keys in internal column families (transformWithState).",
            R,
            since="4.0",
        ),
        _m(
            "rocksdbNumExternalColumnFamilies",
            "rocksdb_external_column_families",
            G,
            "External (user state variable) column families.",
            R,
            since="4.0",
        ),
        _m(
            "rocksdbNumInternalColumnFamilies",
            "rocksdb_internal_column_families",
            G,
            "Internal column families.",
            R,
            since="4.0",
        ),
        _m(
            "rocksdbChangeLogWriterCommitLatencyMs",
            "rocksdb_changelog_commit_seconds_total",
            C,
            "Time committing the changelog.",
            R,
            MS,
            "4.1",
        ),
        _m(
            "rocksdbSaveZipFilesLatencyMs",
            "rocksdb_save_zip_files_seconds_total",
            C,
            "Time saving zipped checkpoint files.",
            R,
            MS,
            "4.1",
        ),
        _m(
            "rocksdbLoadFromSnapshotLatencyMs",
            "rocksdb_load_from_snapshot_seconds_total",
            C,
            "Time loading state from a snapshot.",
            R,
            MS,
            "4.1",
        ),
        _m(
            "rocksdbLoadLatencyMs",
            "rocksdb_load_seconds_total",
            C,
            "Time loading state.",
            R,
            MS,
            "4.1",
        ),
        _m(
            "rocksdbReplayChangeLogLatencyMs",
            "rocksdb_replay_changelog_seconds_total",
            C,
            "Time replaying changelog files.",
            R,
            MS,
            "4.1",
        ),
        _m(
            "rocksdbNumReplayChangelogFiles",
            "rocksdb_replayed_changelog_files_total",
            C,
            "Changelog files replayed.",
            R,
            since="4.1",
        ),
        _m(
            "rocksdbNumLoadedFromDfs",
            "rocksdb_loads_from_dfs_total",
            C,
            "State loads that had to fetch from the checkpoint file system.",
            R,
            since="4.2",
        ),
        _m(
            "rocksdbNumSnapshotsAutoRepaired",
            "rocksdb_snapshots_auto_repaired_total",
            C,
            "Corrupt snapshots repaired automatically.",
            R,
            since="4.2",
        ),
        _m(
            "rocksdbForceSnapshotCount",
            "rocksdb_forced_snapshots_total",
            C,
            "Snapshots forced.",
            R,
            since="4.2",
        ),
        # HDFS provider. The cache counts are running totals per executor-side provider that
        # reset when a provider is unloaded, so they are levels, not counters.
        _m(
            "stateOnCurrentVersionSizeBytes",
            "hdfs_current_version_size_bytes",
            G,
            "Estimated size of the current state version.",
            HD,
        ),
        _m(
            "loadedMapCacheHitCount",
            "hdfs_loaded_map_cache_hits",
            G,
            "Loaded-state cache hits (running count of the executors' providers).",
            HD,
        ),
        _m(
            "loadedMapCacheMissCount",
            "hdfs_loaded_map_cache_misses",
            G,
            "Loaded-state cache misses (running count of the executors' providers).",
            HD,
        ),
        _m(
            "numSnapshotsAutoRepaired",
            "hdfs_snapshots_auto_repaired_total",
            C,
            "Corrupt snapshots repaired automatically.",
            HD,
            since="4.2",
        ),
        _m(
            "forceSnapshotCount",
            "hdfs_forced_snapshots_total",
            C,
            "Snapshots forced.",
            HD,
            since="4.2",
        ),
        # Operator-level keys.
        _m(
            "numDroppedDuplicateRows",
            "dropped_duplicate_rows_total",
            C,
            "Duplicate rows dropped by dropDuplicates.",
            OP,
        ),
        _m(
            "numRowsReadDuringEviction",
            "rows_read_during_eviction_total",
            C,
            "State rows read while evicting.",
            OP,
            since="4.3",
        ),
        _m(
            "numRowsIncrementallyRemoved",
            "rows_incrementally_removed_total",
            C,
            "State rows removed incrementally.",
            OP,
            since="4.3",
        ),
        _m(
            "skippedNullValueCount",
            "join_skipped_null_values_total",
            C,
            "Null values skipped by a stream-stream join (opt-in).",
            OP,
        ),
        _m(
            "initialStateProcessingTimeMs",
            "initial_state_processing_seconds_total",
            C,
            "Time processing the initial state (transformWithState).",
            OP,
            MS,
            "4.0",
        ),
        _m(
            "timerProcessingTimeMs",
            "timer_processing_seconds_total",
            C,
            "Time processing timers (transformWithState).",
            OP,
            MS,
            "4.0",
        ),
        _m(
            "numValueStateVars",
            "value_state_variables",
            G,
            "ValueState variables (summed over state store instances).",
            OP,
            since="4.0",
        ),
        _m(
            "numListStateVars",
            "list_state_variables",
            G,
            "ListState variables (summed over state store instances).",
            OP,
            since="4.0",
        ),
        _m(
            "numMapStateVars",
            "map_state_variables",
            G,
            "MapState variables (summed over state store instances).",
            OP,
            since="4.0",
        ),
        _m(
            "numValueStateWithTTLVars",
            "value_state_ttl_variables",
            G,
            "ValueState variables with TTL (summed over instances).",
            OP,
            since="4.0",
        ),
        _m(
            "numListStateWithTTLVars",
            "list_state_ttl_variables",
            G,
            "ListState variables with TTL (summed over instances).",
            OP,
            since="4.0",
        ),
        _m(
            "numMapStateWithTTLVars",
            "map_state_ttl_variables",
            G,
            "MapState variables with TTL (summed over instances).",
            OP,
            since="4.0",
        ),
        _m(
            "numDeletedStateVars",
            "deleted_state_variables_total",
            C,
            "State variables deleted.",
            OP,
            since="4.0",
        ),
        _m(
            "numRegisteredTimers",
            "timers_registered_total",
            C,
            "Timers registered.",
            OP,
            since="4.0",
        ),
        _m("numDeletedTimers", "timers_deleted_total", C, "Timers deleted.", OP, since="4.0"),
        _m(
            "numExpiredTimers",
            "timers_expired_total",
            C,
            "Timers expired (fired).",
            OP,
            since="4.0",
        ),
        _m(
            "numValuesRemovedDueToTTLExpiry",
            "ttl_expired_values_total",
            C,
            "State values removed because their TTL expired.",
            OP,
            since="4.0",
        ),
    )
}


def split_instance_key(key: str) -> tuple[str, int, str] | None:
    """``SnapshotLastUploaded.partition_3_left-keyToNumValues`` -> (metric, partition, store)."""
    match = INSTANCE_KEY.match(key)
    if match is None:
        return None
    return match["metric"], int(match["partition"]), match["store"]


PER_BATCH_SCALE: dict[str, float] = {k: m.scale for k, m in KNOWN.items() if m.per_batch}
"""Per-batch keys and their scale to base units: what the metric state accumulates."""
