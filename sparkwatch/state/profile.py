"""One store's contents measured in Spark: rows and bytes per partition, the largest keys, rows
behind the watermark. Only aggregates (one row per partition, N keys) reach the driver.

A row's bytes are the UTF-8 length of its key and value as JSON: Spark keeps state as
UnsafeRows whose exact size the data source does not expose, and JSON ranks keys and
partitions the same way the stored size does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkwatch.state.model import Key, Partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

JOIN_INDEX = "index"
"""The row number Spark adds to a join key in the keyWithIndexToValue stores."""


@dataclass(frozen=True, slots=True)
class KeyShape:
    """How a store's keys are grouped for the top keys and where their event time is."""

    fields: tuple[str, ...]
    time_field: str | None
    window: bool
    """The time field is a window struct (its end is what the watermark evicts)."""


def shape(key_type: StructType, store_name: str, operator_name: str = "") -> KeyShape:
    from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

    kept, time_field, window = [], None, False
    for f in key_type.fields:
        is_window = isinstance(f.dataType, StructType) and {"start", "end"} <= set(
            f.dataType.fieldNames())
        if isinstance(f.dataType, TimestampType | TimestampNTZType) or is_window:
            time_field, window = time_field or f.name, window or is_window
        elif not (f.name == JOIN_INDEX and store_name.endswith("IndexToValue")):
            kept.append(f.name)
    if operator_name.startswith("sessionWindow"):
        # The key holds a session's start: a live session may have started long before the
        # watermark, so the start says nothing about eviction.
        time_field, window = None, False
    return KeyShape(tuple(kept), time_field, window)


def as_json(col: Column) -> Column:
    from pyspark.sql import functions as F

    # to_json cannot write a NULL-typed (void) field, as in the global limit's key.
    return F.coalesce(F.to_json(col), F.lit("null"))


def sized(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    key = as_json(_writable(df, "key"))
    value = F.coalesce(F.octet_length(as_json(_writable(df, "value"))), F.lit(0))
    return df.withColumn("_bytes", F.octet_length(key) + value)


def _writable(df: DataFrame, name: str) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import NullType, StructType

    dtype = df.schema[name].dataType
    if not isinstance(dtype, StructType):
        return F.col(name)
    fields = [F.col(f"{name}.{f.name}").alias(f.name) for f in dtype.fields
              if not isinstance(f.dataType, NullType)]
    return F.struct(*fields) if fields else F.lit(None)


def partitions(df: DataFrame, count: int, key_shape: KeyShape, watermark_ms: int | None,
               ) -> tuple[tuple[Partition, ...], int | None]:
    """Rows and bytes per partition, and how many rows are behind the watermark (None without an
    event time or a watermark), from one pass over the store: each pass loads every partition's
    state from the checkpoint again."""
    from pyspark.sql import functions as F

    behind = _behind(key_shape, watermark_ms)
    aggs = [F.count(F.lit(1)).alias("rows"), F.sum("_bytes").alias("bytes")]
    if behind is not None:
        aggs.append(F.sum(F.when(behind, 1).otherwise(0)).alias("expired"))
    rows = df.groupBy("partition_id").agg(*aggs).collect()
    found = {int(r.partition_id): Partition(int(r.partition_id), int(r.rows), int(r.bytes or 0))
             for r in rows}
    ids = range(max([count, *(i + 1 for i in found)]))
    expired = None if behind is None else sum(int(r.expired or 0) for r in rows)
    return tuple(found.get(i, Partition(i, 0, 0)) for i in ids), expired


def _behind(key_shape: KeyShape, watermark_ms: int | None) -> Column | None:
    """Whether a row's event time is behind the watermark: state Spark would have evicted had
    the operator been able to (a window ends at or before it, an event time before it)."""
    from pyspark.sql import functions as F

    if key_shape.time_field is None or watermark_ms is None:
        return None
    col = F.col(f"key.{key_shape.time_field}")
    time = col.getField("end") if key_shape.window else col
    # Strictly behind: a row exactly at the watermark is evicted by some operators, not all.
    return time < F.timestamp_millis(F.lit(watermark_ms))


def top_keys(df: DataFrame, key_shape: KeyShape, n: int) -> tuple[int, tuple[Key, ...]]:
    """How many distinct keys the store has, and the ``n`` largest by bytes (then rows)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    cols = [F.col(f"key.{f}").alias(f) for f in key_shape.fields]
    grouped = F.struct(*cols) if cols else F.col("key")
    per_key = (
        df.withColumn("_key", as_json(grouped))
        .groupBy("_key")
        .agg(F.count(F.lit(1)).alias("rows"), F.sum("_bytes").alias("bytes"))
    )
    # Counted and ranked from one aggregation: kept (spilling to disk) for the two jobs.
    per_key.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        keys = per_key.count()
        top = per_key.orderBy(F.desc("bytes"), F.desc("rows"), "_key").limit(n).collect()
    finally:
        per_key.unpersist()
    return int(keys), tuple(Key(r["_key"], int(r.rows), int(r.bytes or 0)) for r in top)
