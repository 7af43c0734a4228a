"""A local Spark session for the benchmark and Spark's own listener-bus counters."""

from __future__ import annotations

import os
from typing import Any

from bench.local import local_spark

STREAMS_QUEUE = "streams"
STREAMS_CAPACITY_CONF = "spark.scheduler.listenerbus.eventqueue.streams.capacity"


def start_session(app_name: str, workdir: str, streams_capacity: int | None = None) -> Any:
    """``local[2]`` with two shuffle partitions and no UI: what the tests and the issue assume."""
    conf = {
        "spark.local.dir": os.path.join(workdir, "spark-local"),
        "spark.sql.warehouse.dir": os.path.join(workdir, "warehouse"),
    }
    if streams_capacity is not None:
        conf[STREAMS_CAPACITY_CONF] = str(streams_capacity)
    # Spark logs every dropped-event batch at WARN/ERROR; that is what we measure, keep it visible.
    return local_spark(app_name, conf, log_level="WARN")


class ListenerBus:
    """Spark's Dropwizard counters for its listener queues (``LiveListenerBusMetrics``).

    ``streams`` is the queue every StreamingQueryListener hangs off; when a listener is slow it
    fills up with every bus event (tasks, stages, SQL) and Spark drops events for good.
    """

    def __init__(self, spark: Any) -> None:
        self._bus = spark.sparkContext._jsc.sc().listenerBus()
        self._registry = self._bus.metrics().metricRegistry()

    def counter(self, name: str) -> int:
        counter = self._registry.getCounters().get(name)
        return int(counter.getCount()) if counter is not None else 0

    def dropped(self, queue: str = STREAMS_QUEUE) -> int:
        return self.counter(f"queue.{queue}.numDroppedEvents")

    def posted(self) -> int:
        return self.counter("numEventsPosted")

    def size(self, queue: str = STREAMS_QUEUE) -> int:
        gauge = self._registry.getGauges().get(f"queue.{queue}.size")
        return int(gauge.getValue()) if gauge is not None else 0

    def capacity(self, queue: str = STREAMS_QUEUE) -> int | None:
        option = self._bus.getQueueCapacity(queue)
        return int(option.get()) if option.isDefined() else None

    def wait_until_empty(self, timeout_s: float) -> bool:
        """Block until every queued bus event was handed to every listener; False on timeout."""
        try:
            self._bus.waitUntilEmpty(int(timeout_s * 1000))
        except Exception as exc:  # noqa: BLE001 - Py4J wraps the JVM TimeoutException
            if "TimeoutException" in str(exc):
                return False
            raise
        return True
