"""The change feed between two batches (where the checkpoint keeps changelogs: the HDFS provider,
RocksDB with changelog checkpointing): how many keys were put and removed, and which."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkwatch.state.model import Changes, Growth, Target
from sparkwatch.state.profile import as_json
from sparkwatch.state.source import StateError, change_frame, spark_reason, store_frame

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def changes(spark: SparkSession, checkpoint: str, target: Target, first: int, last: int,
            top: int) -> Changes:
    """Puts and removes recorded in batches ``first``..``last`` (both included); the keys listed
    are at most ``top`` of each, in key order."""
    from pyspark.sql import functions as F

    try:
        df = change_frame(spark, checkpoint, target, first, last).withColumn(
            "_key", as_json(F.col("key")))
        counts = {r.change_type: int(r["count"]) for r in df.groupBy("change_type").count()
                  .collect()}
    except Exception as exc:  # noqa: BLE001 - Spark says why (no changelog, batch cleaned up)
        raise StateError(f"no change feed for {target.label} in batches {first}..{last}: "
                         f"{spark_reason(exc)}") from exc

    def keys(kind: str) -> tuple[str, ...]:
        if top <= 0:
            return ()
        rows = (df.where(F.col("change_type") == kind).select("_key").distinct()
                .orderBy("_key").limit(top).collect())
        return tuple(r["_key"] for r in rows)

    return Changes(first, last, counts.get("update", 0), counts.get("delete", 0),
                   keys("update"), keys("delete"))



RECENT_BATCHES = 10
MIN_GROWTH_BATCHES = 2


def recent_growth(spark: SparkSession, checkpoint: str, target: Target, last: int,
                  rows_last: int, batches: int = RECENT_BATCHES,
                  least: int = MIN_GROWTH_BATCHES) -> Growth | None:
    """Rows ``batches`` batches before ``last`` against ``rows_last``, and the change feed in
    between; None when fewer than ``least`` batches follow the first one kept, or without a
    change feed."""
    first = max(target.min_batch, last - batches)
    if last - first < least:
        return None
    try:
        feed = changes(spark, checkpoint, target, first + 1, last, top=0)
    except StateError:
        return None
    try:
        rows_first = store_frame(spark, checkpoint, target, first).count()
    except Exception:  # noqa: BLE001 - that batch's state may be cleaned up: no growth to tell
        return None
    return Growth(rows_first, rows_last, feed)
