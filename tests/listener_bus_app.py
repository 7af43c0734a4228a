"""Run by test_listener_bus in its own process: Spark's ``streams`` listener queue fixes its
capacity when the SparkContext starts, so this session cannot be the tests' shared one.

A deliberately slow streaming listener blocks the queue's thread while a query's tasks keep
posting events: Spark drops events from the full queue. Prints one JSON line with the
exposition before and after, and Spark's own counts read straight from the JVM.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from prometheus_client import generate_latest

import sparkwatch
from sparkwatch.listener.bus_sampler import listener_bus

STREAMS_CAPACITY = 2


def jvm_counts(spark: Any) -> dict[str, dict[str, int]]:
    registry = listener_bus(spark).metrics().metricRegistry()
    counters, gauges = registry.getCounters(), registry.getGauges()
    queues = [k.split(".")[1] for k in counters.keySet() if k.endswith(".numDroppedEvents")]
    return {
        q: {
            "dropped": int(counters.get(f"queue.{q}.numDroppedEvents").getCount()),
            "size": int(gauges.get(f"queue.{q}.size").getValue()),
        }
        for q in queues
    }


def events_posted(spark: Any) -> int:
    """Every event ever posted to the bus: a count that moves with each one, even one posted and
    processed between two readings of the queues."""
    counters = listener_bus(spark).metrics().metricRegistry().getCounters()
    return int(counters.get("numEventsPosted").getCount())


def wait_until(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StreamingQueryListener

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("listener-bus-drops")
        .config("spark.scheduler.listenerbus.eventqueue.streams.capacity", STREAMS_CAPACITY)
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    att = sparkwatch.attach(spark, metrics_port=0, history_url="off",
                            listener_bus_sample_seconds=0.2)
    before = generate_latest(att.registry).decode()
    slowed = threading.Event()

    class Slow(StreamingQueryListener):
        """Holds the streams queue's only thread: everything posted meanwhile overflows."""

        def onQueryStarted(self, event: Any) -> None: ...

        def onQueryProgress(self, event: Any) -> None:
            slowed.set()
            time.sleep(1.0)

        def onQueryIdle(self, event: Any) -> None: ...

        def onQueryTerminated(self, event: Any) -> None: ...

    spark.streams.addListener(Slow())
    query = (
        spark.readStream.format("rate").option("rowsPerSecond", 100).load()
        .groupBy((F.col("value") % 5).alias("k")).count()
        .writeStream.format("noop").outputMode("complete")
        .trigger(processingTime="100 milliseconds").start()
    )

    def dropped_and_seen() -> bool:
        sample = att.bus.latest if att.bus is not None else None
        return sample is not None and any(q.dropped > 0 for q in sample.queues)

    assert wait_until(dropped_and_seen, 120), "Spark dropped no listener event"
    query.stop()
    bus = att.bus
    assert bus is not None
    settled: dict[str, Any] = {}

    def sampled_while_settled() -> bool:
        """Spark's counts settle once the queues drain, but the other queues still take an event
        now and then (executor heartbeats): the sample counts only when no event was posted
        between two readings of Spark's counts, with every queue empty, around it."""
        posted, jvm = events_posted(spark), jvm_counts(spark)
        if any(q["size"] for q in jvm.values()):
            return False
        bus.sample_now()
        settled.update(jvm=jvm, after=generate_latest(att.registry).decode())
        return events_posted(spark) == posted and jvm_counts(spark) == jvm

    assert wait_until(sampled_while_settled, 60), "Spark's listener queues never settled"
    print(json.dumps({"app_id": att.app.id, "app_name": att.app.name, "before": before,
                      **settled}), flush=True)
    spark.stop()  # the stop line (stderr) comes from the atexit detach


if __name__ == "__main__":
    sys.exit(main())
