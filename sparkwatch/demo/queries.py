"""The demo's stateful streaming queries: one per kind of state operator Spark reports, plus one
deliberately skewed (``skewed_keys``) for `sparkwatch state` and `doctor --inspect-state` to show.

Every query reads the ``rate`` source (one partition, a few rows per second) and derives its keys
and event times from the rate's ``value`` and ``timestamp``, writes to the ``noop`` sink and runs
on a processing-time trigger, so all of them together stay light enough for two cores.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkwatch.demo.session import PROVIDER_CONF, STATE_STORES, session_conf, spark_version
from sparkwatch.demo.stopping import stop_all

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, GroupedData, SparkSession
    from pyspark.sql.streaming import StreamingQuery

# A streaming limit keeps one state row (the count so far); once the count reaches the limit every
# later batch is cut to nothing and the operator stops updating. A billion rows (the limit must fit
# an Int) is years of a rate source at demo speed, so the operator counts for the whole demo.
LIMIT_ROWS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class DemoConfig:
    checkpoint_dir: Path
    rows_per_second: int = 10
    trigger_seconds: float = 3.0


@dataclass(frozen=True, slots=True)
class DemoQuery:
    """A query to start; ``operator`` is the operatorName Spark reports for its state."""

    name: str
    operator: str
    build: Callable[[SparkSession, DemoConfig], DataFrame]
    output_mode: str = "append"
    min_version: tuple[int, int] = (3, 5)
    needs_rocksdb: bool = False
    conf: tuple[tuple[str, str], ...] = ()
    """SQL conf the query starts with (captured into its checkpoint)."""
    operator_before_4: str | None = None
    """operatorName on Spark 3.x when it differs (the session window's was ``defaultName``)."""

    def operator_on(self, version: tuple[int, int]) -> str:
        if version < (4, 0) and self.operator_before_4:
            return self.operator_before_4
        return self.operator


def rate(spark: SparkSession, cfg: DemoConfig, rows_per_second: int | None = None) -> DataFrame:
    # One partition: a second rate partition would double the tasks of every batch for nothing.
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second or cfg.rows_per_second)
        .option("numPartitions", 1)
        .load()
    )


def window_agg(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        rate(spark, cfg)
        .withColumn("key", F.col("value") % 5)
        .withWatermark("timestamp", "10 seconds")
        .groupBy(F.window("timestamp", "10 seconds"), "key")
        .count()
    )


def dedupe(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    from pyspark.sql import functions as F

    # Seven users per second: at 10 rows/s three rows of each second are duplicates.
    return (
        rate(spark, cfg)
        .withColumn("user", F.col("value") % 7)
        .withColumn("event_time", F.date_trunc("second", "timestamp"))
        .withWatermark("event_time", "10 seconds")
        .dropDuplicates(["user", "event_time"])
    )


def dedupe_within_watermark(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        rate(spark, cfg)
        .withColumn("user", F.col("value") % 7)
        .withWatermark("timestamp", "5 seconds")
        .dropDuplicatesWithinWatermark(["user"])
    )


def session_windows(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    from pyspark.sql import functions as F

    # Users go quiet for 7 s out of every 15, longer than the 5 s gap, so sessions close and the
    # state shows rows being removed, not only growing.
    return (
        rate(spark, cfg, max(1, cfg.rows_per_second // 2))
        .where(F.second("timestamp") % 15 < 8)
        .withColumn("user", F.col("value") % 3)
        .withWatermark("timestamp", "5 seconds")
        .groupBy(F.session_window("timestamp", "5 seconds"), "user")
        .count()
    )


def stream_stream_join(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    from pyspark.sql import functions as F

    half = max(1, cfg.rows_per_second // 2)
    impressions = (
        rate(spark, cfg, half)
        .select((F.col("value") % 10).alias("imp_ad"), F.col("timestamp").alias("imp_time"))
        .withWatermark("imp_time", "10 seconds")
    )
    clicks = (
        rate(spark, cfg, half)
        .select((F.col("value") % 10).alias("click_ad"), F.col("timestamp").alias("click_time"))
        .withWatermark("click_time", "10 seconds")
    )
    # The time range bounds how long each side must be kept, so the join state stays small.
    condition = F.expr(
        "click_ad = imp_ad AND click_time BETWEEN imp_time AND imp_time + interval 5 seconds"
    )
    return impressions.join(clicks, condition)


SKEWED_PARTITIONS = "4"
"""skewed_keys keeps its state in 4 partitions (the others in 2): with two, the median partition
is the mean of both and no partition can stand out."""


def skewed_keys(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    """Deliberately skewed: customer 0 places nine orders in ten, so one key owns most of the
    join's state, all of it in one partition (what `doctor --inspect-state` reports)."""
    from pyspark.sql import functions as F

    def side(name: str) -> DataFrame:
        customer = F.when(F.col("value") % 10 < 9, F.lit(0)).otherwise(F.col("value") % 97)
        return rate(spark, cfg).select(
            customer.alias(f"{name}_customer"), F.col("timestamp").alias(f"{name}_time")
        ).withWatermark(f"{name}_time", "10 seconds")

    # Bounded in event time like stream_stream_join: the state is skewed, not growing.
    condition = F.expr(
        "payment_customer = order_customer AND "
        "payment_time BETWEEN order_time AND order_time + interval 5 seconds"
    )
    return side("order").join(side("payment"), condition)


def global_limit(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    return rate(spark, cfg).limit(LIMIT_ROWS)


def _count_per_user(
    key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: Any
) -> Iterator[pd.DataFrame]:
    import pandas as pd

    seen = state.get[0] if state.exists else 0
    for pdf in pdfs:
        seen += len(pdf)
    state.update((seen,))
    yield pd.DataFrame({"user": [key[0]], "seen": [seen]})


def _by_user(spark: SparkSession, cfg: DemoConfig) -> GroupedData:
    """The rate source's rows grouped by one of three users (the pandas state queries' keys)."""
    from pyspark.sql import functions as F

    return rate(spark, cfg).withColumn("user", F.col("value") % 3).groupBy("user")


def apply_in_pandas_with_state(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    return (
        _by_user(spark, cfg)
        .applyInPandasWithState(
            _count_per_user,
            outputStructType="user long, seen long",
            stateStructType="seen long",
            outputMode="update",
            timeoutConf="NoTimeout",
        )
    )


def transform_with_state_in_pandas(spark: SparkSession, cfg: DemoConfig) -> DataFrame:
    from sparkwatch.demo.processor import CountPerUser

    return (
        _by_user(spark, cfg)
        .transformWithStateInPandas(
            statefulProcessor=CountPerUser(),
            outputStructType="user long, seen long",
            outputMode="Update",
            timeMode="None",
        )
    )


UNINTERRUPTIBLE_PLANNING = frozenset({"symmetricHashJoin"})
"""Operators whose planning Spark 4.x cannot take an interrupt in (see
:mod:`sparkwatch.demo.stopping`): a query holding one is stopped only between its batches."""


def interruptible(queries: list[DemoQuery]) -> frozenset[str]:
    """The names of the queries a stop may interrupt in a batch."""
    return frozenset(q.name for q in queries if q.operator not in UNINTERRUPTIBLE_PLANNING)


# Started in this order: the slowest first batches go first (transformWithState spawns a Python
# runner while planning, the pandas queries spawn Python workers, the join reads two sources), so
# they are not the last to report state.
QUERIES: tuple[DemoQuery, ...] = (
    DemoQuery(
        "transform_with_state_in_pandas", "transformWithStateInPandasExec",
        transform_with_state_in_pandas, output_mode="update", min_version=(4, 0),
        needs_rocksdb=True,
    ),
    DemoQuery(
        "apply_in_pandas_with_state", "applyInPandasWithState", apply_in_pandas_with_state,
        output_mode="update",
    ),
    DemoQuery("stream_stream_join", "symmetricHashJoin", stream_stream_join),
    DemoQuery("skewed_keys", "symmetricHashJoin", skewed_keys,
              conf=(("spark.sql.shuffle.partitions", SKEWED_PARTITIONS),)),
    DemoQuery("window_agg", "stateStoreSave", window_agg),
    DemoQuery("dedupe", "dedupe", dedupe),
    DemoQuery("dedupe_within_watermark", "dedupeWithinWatermark", dedupe_within_watermark),
    DemoQuery(
        "session_window", "sessionWindowStateStoreSaveExec", session_windows,
        operator_before_4="defaultName",
    ),
    DemoQuery("global_limit", "globalLimit", global_limit),
)


def available(version: tuple[int, int]) -> list[DemoQuery]:
    """The demo queries this Spark version can run."""
    return [q for q in QUERIES if version >= q.min_version]


def start(spark: SparkSession, query: DemoQuery, cfg: DemoConfig) -> StreamingQuery:
    writer = (
        query.build(spark, cfg)
        .writeStream.format("noop")
        .queryName(query.name)
        .outputMode(query.output_mode)
        .trigger(processingTime=f"{cfg.trigger_seconds} seconds")
        .option("checkpointLocation", str(cfg.checkpoint_dir / query.name))
    )
    conf = dict(query.conf)
    if query.needs_rocksdb:
        # transformWithState refuses any other provider; the query keeps RocksDB even when the
        # demo runs the others on HDFS, because the conf is captured when the query starts.
        conf[PROVIDER_CONF] = STATE_STORES["rocksdb"]
    with contextlib.ExitStack() as stack:
        for key, value in conf.items():
            stack.enter_context(session_conf(spark, key, value))
        return writer.start()


def start_all(
    spark: SparkSession, cfg: DemoConfig, queries: list[DemoQuery] | None = None
) -> list[StreamingQuery]:
    chosen = available(spark_version(spark)) if queries is None else queries
    started: list[StreamingQuery] = []
    try:
        for query in chosen:
            started.append(start(spark, query, cfg))
    except BaseException:
        stop_all(started, cfg.trigger_seconds, interruptible=interruptible(chosen))
        raise
    return started
