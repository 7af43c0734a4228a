"""The Spark settings read with a plan, and the state store provider's short name."""

from __future__ import annotations

from collections.abc import Mapping

PROVIDER = "spark.sql.streaming.stateStore.providerClass"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
WATERMARK_POLICY = "spark.sql.streaming.multipleWatermarkPolicy"
BOUNDED_MEMORY = "spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"

CHECKPOINT_KEYS = (PROVIDER, SHUFFLE_PARTITIONS, WATERMARK_POLICY)
"""Fixed by the checkpoint (offset log metadata): what the run actually uses."""
SESSION_KEYS = (BOUNDED_MEMORY, CHANGELOG)
"""Read from the query's session: they may change on restart."""

_SHORT = {
    "HDFSBackedStateStoreProvider": "hdfs",
    "RocksDBStateStoreProvider": "rocksdb",
}


def provider_name(settings: Mapping[str, str]) -> str | None:
    """``rocksdb``, ``hdfs``, or the class's simple name for any other provider."""
    cls = settings.get(PROVIDER)
    if not cls:
        return None
    simple = cls.rsplit(".", 1)[-1]
    return _SHORT.get(simple, simple)


def is_true(settings: Mapping[str, str], key: str) -> bool:
    return settings.get(key, "").strip().lower() == "true"
