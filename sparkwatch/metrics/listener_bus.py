"""Spark's listener bus as sampled from the driver: what the ``spark_streaming_listener_bus_*``
series show.

Spark hands every listener event to a bounded queue per listener group (``streams``,
``appStatus``, ``executorManagement``, ``eventLog``, ``shared``); when one is full, Spark drops
the event for every listener of that queue and only says so in the driver log.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BusQueue:
    name: str
    dropped: int
    """Events Spark dropped because this queue was full (since the SparkContext started)."""
    size: int
    capacity: int | None
    processed: int | None = None
    """Events the queue's listeners processed (Spark's listenerProcessingTime timer count)."""
    mean_processing_seconds: float | None = None
    """Mean time to hand one event to all of the queue's listeners (recent events)."""


@dataclass(frozen=True, slots=True)
class BusSample:
    posted: int
    """Events posted to the bus (all queues)."""
    queues: tuple[BusQueue, ...] = field(default=())

    @property
    def dropped(self) -> int:
        return sum(q.dropped for q in self.queues)
