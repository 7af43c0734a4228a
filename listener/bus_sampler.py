"""Samples Spark's LiveListenerBus from the driver: per queue, events dropped, queue size and
listener processing time.

Spark drops listener events for every listener of a queue when that queue is full (e.g. the
``streams`` queue behind all streaming listeners, sparkwatch's included) and says so only in the
driver log. The numbers come from the bus's own Dropwizard registry (``numEventsPosted``,
``queue.<name>.numDroppedEvents``, ``queue.<name>.size``, ``queue.<name>.listenerProcessingTime``),
read over py4j on a worker thread every few seconds: a scrape only reads the latest sample and
never waits for the JVM.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sparkwatch.metrics.listener_bus import BusQueue, BusSample
from sparkwatch.worker import Worker

log = logging.getLogger(__name__)

CAPACITY_KEY = "spark.scheduler.listenerbus.eventqueue.capacity"
DEFAULT_CAPACITY = 10_000
NANOS = 1e-9


def listener_bus(spark: Any) -> Any:
    """The driver's LiveListenerBus (a py4j object); raises when the JVM is out of reach."""
    return spark.sparkContext._jsc.sc().listenerBus()


def read_sample(bus: Any, conf: Any) -> BusSample:
    """One sample of the bus's registry (several py4j calls; run off Spark's threads)."""
    registry = bus.metrics().metricRegistry()
    counters, gauges, timers = registry.getCounters(), registry.getGauges(), registry.getTimers()
    names = sorted(
        key.removeprefix("queue.").removesuffix(".numDroppedEvents")
        for key in counters.keySet()
        if key.startswith("queue.") and key.endswith(".numDroppedEvents")
    )
    queues = []
    for name in names:
        size = gauges.get(f"queue.{name}.size")
        timer = timers.get(f"queue.{name}.listenerProcessingTime")
        queues.append(
            BusQueue(
                name=name,
                dropped=int(counters.get(f"queue.{name}.numDroppedEvents").getCount()),
                size=int(size.getValue()) if size is not None else 0,
                capacity=_capacity(conf, name),
                processed=int(timer.getCount()) if timer is not None else None,
                mean_processing_seconds=(
                    float(timer.getSnapshot().getMean()) * NANOS if timer is not None else None
                ),
            )
        )
    posted = counters.get("numEventsPosted")
    return BusSample(posted=int(posted.getCount()) if posted is not None else 0,
                     queues=tuple(queues))


def _capacity(conf: Any, queue: str) -> int | None:
    """Spark's capacity of ``queue``: its own key, else the shared one, else Spark's default."""
    try:
        own = conf.get(f"spark.scheduler.listenerbus.eventqueue.{queue}.capacity", None)
        raw = own or conf.get(CAPACITY_KEY, None)
        return int(raw) if raw else DEFAULT_CAPACITY
    except (ValueError, TypeError):
        return None


class BusSampler:
    """Keeps the latest :class:`BusSample`, refreshed every ``seconds`` on its own worker."""

    def __init__(self, bus: Any, conf: Any, seconds: float) -> None:
        self._bus = bus
        self._conf = conf
        self._seconds = seconds
        self._stop = threading.Event()
        self._latest: BusSample | None = None
        self._failed = False
        self.worker = Worker("listener_bus", self._run, "sparkwatch-listener-bus")

    @property
    def latest(self) -> BusSample | None:
        return self._latest

    def start(self) -> None:
        self.worker.start()

    def sample_now(self) -> BusSample | None:
        """Read the bus once (on the caller's thread); keeps the last good sample on failure."""
        try:
            self._latest = read_sample(self._bus, self._conf)
            self._failed = False
        except Exception:  # noqa: BLE001 - the SparkContext may be stopping; keep the last sample
            if not self._failed:
                log.debug("sparkwatch: reading Spark's listener bus failed", exc_info=True)
            self._failed = True
        return self._latest

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self.worker.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample_now()
            self.worker.beat()
            if self.worker.wait(self._seconds, self._stop):
                return


def make_bus_sampler(spark: Any, seconds: float) -> BusSampler | None:
    """A started sampler, or None when sampling is off or the JVM is out of reach (Connect)."""
    if seconds <= 0:
        return None
    try:
        bus = listener_bus(spark)
        conf = spark.sparkContext.getConf()
    except Exception:  # noqa: BLE001 - Spark Connect: the bus lives in the server
        log.debug("sparkwatch: Spark's listener bus is out of reach, not sampling it")
        return None
    sampler = BusSampler(bus, conf, seconds)
    sampler.sample_now()
    sampler.start()
    return sampler
