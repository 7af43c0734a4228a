"""Stateful queries beyond tests/workloads.py: chained operators and the problems doctor finds.

Used by the plan tests (real Spark) and by the scripts that record the committed plan and doctor
fixtures (``scripts/capture_plans.py``, ``scripts/record_doctor_histories.py``). Each scenario
writes its own deterministic JSON-lines input, one file per micro-batch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.workloads import EPOCH, HDFS, ROCKSDB, _stream, write_batches

Rows = Iterable[tuple[int, str, int]]
"""(seconds after EPOCH, key, v) per row."""


def write_rows(directory: Path, batches: list[list[tuple[int, str, int]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for b, rows in enumerate(batches):
        lines = [
            json.dumps({"ts": (EPOCH + timedelta(seconds=s)).isoformat(), "key": k, "v": v})
            for s, k, v in rows
        ]
        path = directory / f"part-{b:04d}.json"
        path.write_text("\n".join(lines) + "\n")
        # The file source reads files in modification-time order: make it the batch order.
        os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))


# --- queries ------------------------------------------------------------------------------------


def chained(spark: Any, root: Path) -> Any:
    """dropDuplicates then a window aggregation: Spark lists the aggregation (nearer the sink)
    first."""
    from pyspark.sql import functions as F

    deduped = _stream(spark, root / "in").withWatermark("ts", "5 seconds").dropDuplicates(
        ["key", "ts"]
    )
    return deduped.groupBy(F.window("ts", "4 seconds"), "key").count()


def two_aggregations(spark: Any, root: Path) -> Any:
    """Two window aggregations chained with window_time (Spark 3.5+ multiple stateful ops)."""
    from pyspark.sql import functions as F

    first = (
        _stream(spark, root / "in")
        .withWatermark("ts", "5 seconds")
        .groupBy(F.window("ts", "4 seconds"), "key")
        .count()
    )
    return first.groupBy(F.window(F.window_time("window"), "8 seconds"), "key").agg(
        F.sum("count").alias("total")
    )


def agg_no_watermark(spark: Any, root: Path) -> Any:
    return _stream(spark, root / "in").groupBy("key").count()


def agg_watermark_not_key(spark: Any, root: Path) -> Any:
    return _stream(spark, root / "in").withWatermark("ts", "5 seconds").groupBy("key").count()


def dedupe_no_watermark(spark: Any, root: Path) -> Any:
    return _stream(spark, root / "in").dropDuplicates(["key"])


def join_no_bounds(spark: Any, root: Path) -> Any:
    from pyspark.sql import functions as F

    left = _stream(spark, root / "left").alias("l")
    right = _stream(spark, root / "right").alias("r")
    return left.join(right, F.expr("l.key = r.key")).select("l.key", "l.v", "r.v")


def late_window_agg(spark: Any, root: Path) -> Any:
    """A 2 s watermark on data arriving up to 20 s out of order: late rows are dropped."""
    from pyspark.sql import functions as F

    df = _stream(spark, root / "in").withWatermark("ts", "2 seconds")
    return df.groupBy(F.window("ts", "10 seconds"), "key").count()


def healthy_window_agg(spark: Any, root: Path) -> Any:
    """A 10 s watermark on in-order data: windows close and their state is removed."""
    from pyspark.sql import functions as F

    df = _stream(spark, root / "in").withWatermark("ts", "10 seconds")
    return df.groupBy(F.window("ts", "10 seconds"), "key").count()


# --- inputs -------------------------------------------------------------------------------------

BATCHES = 6


def workload_input(root: Path, inputs: tuple[str, ...]) -> None:
    """The input of tests/workloads.py (event time advancing, a few late rows)."""
    for sub in inputs:
        write_batches(root / sub, batches=4, rows=12)


def growing_keys(root: Path, inputs: tuple[str, ...]) -> None:
    """New keys every batch: state that is never evicted grows batch after batch."""
    for sub in inputs:
        write_rows(
            root / sub,
            [[(b * 10 + i % 10, f"u{b}-{i % 10}", i) for i in range(20)] for b in range(BATCHES)],
        )


def repeating_keys(root: Path, inputs: tuple[str, ...]) -> None:
    """The same few keys every batch (join sides): matches keep coming, state keeps growing."""
    for sub in inputs:
        write_rows(
            root / sub,
            [[(b * 10 + i, f"k{i % 4}", b * 100 + i) for i in range(8)] for b in range(BATCHES)],
        )


def late_rows(root: Path, inputs: tuple[str, ...]) -> None:
    """Batch b spans [60b, 60b+30] s; from batch 2 on, 5 rows 79 s behind the newest event time
    seen so far, older than the previous batch's watermark (which Spark drops late rows by)."""
    for sub in inputs:
        batches = []
        for b in range(BATCHES):
            rows = [(60 * b + (i * 7) % 31, f"k{i % 3}", i) for i in range(15)]
            if b > 1:
                rows += [(60 * (b - 2) + 10, f"k{i % 3}", 100 + i) for i in range(5)]
            batches.append(rows)
        write_rows(root / sub, batches)


def in_order(root: Path, inputs: tuple[str, ...]) -> None:
    """Event time advancing 20 s per batch, in order: nothing is ever late."""
    for sub in inputs:
        write_rows(
            root / sub,
            [[(20 * b + i % 10, f"k{i % 3}", i) for i in range(15)] for b in range(BATCHES)],
        )


@dataclass(frozen=True)
class Scenario:
    name: str
    build: Callable[[Any, Path], Any]
    output_mode: str
    write_input: Callable[[Path, tuple[str, ...]], None] = workload_input
    inputs: tuple[str, ...] = ("in",)
    provider: str = HDFS


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("chained", chained, "append"),
        Scenario("two_aggregations", two_aggregations, "append"),
        Scenario("agg_watermark_not_key", agg_watermark_not_key, "update"),
        Scenario("agg_no_watermark", agg_no_watermark, "update", growing_keys),
        Scenario("dedupe_no_watermark", dedupe_no_watermark, "append", growing_keys),
        Scenario(
            "join_no_bounds", join_no_bounds, "append", repeating_keys, ("left", "right"), ROCKSDB
        ),
        Scenario("late_data", late_window_agg, "append", late_rows),
        Scenario("healthy", healthy_window_agg, "append", in_order, provider=ROCKSDB),
    )
}
DOCTOR_SCENARIOS = (
    "agg_no_watermark",
    "dedupe_no_watermark",
    "join_no_bounds",
    "late_data",
    "healthy",
)


def start(spark: Any, scenario: Scenario, root: Path, trigger: dict[str, Any]) -> Any:
    """Write the scenario's input and start it with ``trigger`` (e.g. availableNow=True)."""
    scenario.write_input(root, scenario.inputs)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", scenario.provider)
    try:
        return (
            scenario.build(spark, root)
            .writeStream.format("noop")
            .outputMode(scenario.output_mode)
            .queryName(scenario.name)
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(**trigger)
            .start()
        )
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")
