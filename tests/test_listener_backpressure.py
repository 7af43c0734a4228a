"""A listener whose history database is unreachable must cost Spark nothing: batches keep their
pace, queues stay bounded, and what could not be kept is counted."""

from __future__ import annotations

from typing import Any

import pytest

import sparkwatch
from tests.support import wait_for

pytestmark = pytest.mark.spark

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere?connect_timeout=1"
BATCHES = 12
"""Enough for the history queue (5 events) to fill and drop several times over, and for a median
of nine steady batches."""


@pytest.fixture
def rate_query(spark: Any, tmp_path: Any) -> Any:
    from pyspark.sql import functions as F

    def start(name: str) -> Any:
        df = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
        agg = df.groupBy((F.col("value") % 7).alias("k")).count()
        return (
            agg.writeStream.format("noop").outputMode("update").queryName(name)
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(processingTime="100 milliseconds").start()
        )

    started: list[Any] = []
    yield lambda name: started.append(start(name)) or started[-1]
    for q in started:
        q.stop()


def test_unreachable_history_keeps_spark_running_queue_bounded_and_drops_counted(
    spark: Any, rate_query: Any
) -> None:
    att = sparkwatch.attach(
        spark, metrics_port=0, history_url=UNREACHABLE, history_queue_capacity=5,
        history_batch_size=2, history_flush_seconds=0.05,
    )
    try:
        query = rate_query("slow_consumer")
        wait_for(lambda: len(query.recentProgress) >= BATCHES, 120,
                 f"{BATCHES} batches with a dead history DB")
        assert query.isActive and query.exception() is None
        wait_for(lambda: att.stats().dropped.get("history", 0) > 0, 30, "history drops")
        stats = att.stats()
        size, capacity = stats.queues["history"]
        assert capacity == 5 and size <= capacity
        assert stats.delivery_failures.get("history", 0) >= 1
        assert stats.dropped.get("intake", 0) == 0, "Spark's callback thread must never wait"
        # metrics keep flowing while the history is down: the intake drains, the history cannot
        assert att.intake is not None and att.intake.flush(10)
        state = att.state.query(att.app.id, str(query.id))
        assert state is not None and state.batches >= BATCHES
    finally:
        att.detach(timeout=2)


def test_batches_keep_their_pace_with_a_dead_history(spark: Any, rate_query: Any) -> None:
    """Median batch duration with a listener stuck on its database equals the one without
    (measured before and after: the machine's load, which other work changes, moves both)."""
    def median_batch_ms(name: str) -> float:
        query = rate_query(name)
        wait_for(lambda: len(query.recentProgress) >= BATCHES, 120, f"{BATCHES} batches of {name}")
        # the first batches (planning, JIT) are slower whatever the listener does
        durations = sorted(p["batchDuration"] for p in list(query.recentProgress)[3:BATCHES])
        query.stop()
        return durations[len(durations) // 2]

    before = median_batch_ms("pace_baseline")
    att = sparkwatch.attach(spark, metrics_port=0, history_url=UNREACHABLE,
                            history_queue_capacity=5)
    try:
        stuck = median_batch_ms("pace_dead_history")
    finally:
        att.detach(timeout=2)
    baseline = max(before, median_batch_ms("pace_baseline_after"))
    assert stuck <= baseline * 2 + 100, f"batches slowed from {baseline} ms to {stuck} ms"
