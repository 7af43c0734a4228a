"""The streaming workload: N identical stateful queries that each produce a batch per trigger."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

POLL_S = 0.2


def windowed_count(spark: Any, rows_per_batch: int, trigger_ms: int) -> Any:
    """rate-micro-batch -> watermark -> 1 s tumbling-window count per key.

    ``rate-micro-batch`` (not ``rate``) because it hands every trigger a fixed number of rows: the
    plain rate source only advances once per second, so short triggers would mostly be idle and
    produce no progress event. Its event time advances by one trigger per batch, so the watermark
    moves, windows close and the state store keeps removing rows as well as adding them.
    """
    from pyspark.sql import functions as F

    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 1)
        .option("advanceMillisPerBatch", trigger_ms)
        .load()
        .withColumn("key", F.col("value") % 10)
        .withWatermark("timestamp", "2 seconds")
        .groupBy(F.window("timestamp", "1 second"), "key")
        .count()
    )


def start_queries(spark: Any, n: int, rows_per_batch: int, trigger_ms: int, root: str) -> list[Any]:
    queries = []
    for i in range(n):
        df = windowed_count(spark, rows_per_batch, trigger_ms)
        queries.append(
            df.writeStream.format("noop")
            .outputMode("append")
            .queryName(f"bench_q{i}")
            .option("checkpointLocation", os.path.join(root, f"q{i}"))
            .trigger(processingTime=f"{trigger_ms} milliseconds")
            .start()
        )
    return queries


def wait_first_progress(queries: list[Any], timeout_s: float) -> bool:
    """Wait until every query has completed a batch (Spark warmed up); False at the deadline.

    The first batch of each query plans and compiles for seconds; measuring from here keeps that
    start-up out of the run window (its events are still counted and timed).
    """
    deadline = time.monotonic() + timeout_s
    pending = list(queries)
    tick = threading.Event()  # never set: wait() is the poll interval, bounded by the deadline
    while pending and time.monotonic() < deadline:
        pending = [q for q in pending if q.lastProgress is None and q.isActive]
        if pending:
            tick.wait(POLL_S)
    return not pending


def stop_queries(queries: list[Any]) -> None:
    for query in queries:
        query.stop()


def produced_progress_events(queries: list[Any]) -> int:
    """Progress events Spark emitted: one per completed batch, batch ids start at 0 (fresh
    checkpoints), so a query emitted ``lastProgress.batchId + 1``. Call after stopping."""
    total = 0
    for query in queries:
        last = query.lastProgress
        if last is not None:
            total += int(last["batchId"]) + 1
    return total


def failures(queries: list[Any]) -> list[str]:
    return [f"{q.name}: {q.exception()}" for q in queries if q.exception() is not None]
