"""The listener's own health counters: received, dropped, failed deliveries, queue depths."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from sparkwatch.metrics.listener_bus import BusSample
from sparkwatch.model.events import AppInfo


@dataclass(frozen=True, slots=True)
class ListenerStats:
    """A consistent snapshot of one listener's counters."""

    app: AppInfo
    mode: str
    version: str
    received: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)
    delivery_failures: dict[str, int] = field(default_factory=dict)
    parse_errors: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    """where -> failures caught instead of raised into the app"""
    delivered: dict[str, int] = field(default_factory=dict)
    """sink name -> events delivered"""
    queues: dict[str, tuple[int, int]] = field(default_factory=dict)
    """queue name -> (size, capacity)"""
    workers: dict[str, float] = field(default_factory=dict)
    """worker name -> Unix time of its last heartbeat"""
    bus: BusSample | None = None
    """Spark's listener bus, last sampled (classic mode, when sampling is on)"""


class ListenerCounters:
    """Counters bumped from several threads; cheap enough for the Spark callback thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.received: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.delivery_failures: dict[str, int] = {}
        self.delivered: dict[str, int] = {}
        self.parse_errors = 0
        self.errors: dict[str, int] = {}

    def count_error(self, where: str) -> None:
        with self._lock:
            self.errors[where] = self.errors.get(where, 0) + 1

    def count_received(self, kind: str) -> None:
        with self._lock:
            self.received[kind] = self.received.get(kind, 0) + 1

    def count_dropped(self, stage: str, n: int = 1) -> None:
        with self._lock:
            self.dropped[stage] = self.dropped.get(stage, 0) + n

    def count_delivery_failure(self, sink: str) -> None:
        with self._lock:
            self.delivery_failures[sink] = self.delivery_failures.get(sink, 0) + 1

    def count_delivered(self, sink: str, n: int) -> None:
        with self._lock:
            self.delivered[sink] = self.delivered.get(sink, 0) + n

    def count_parse_error(self) -> None:
        with self._lock:
            self.parse_errors += 1

    def snapshot(
        self,
        app: AppInfo,
        mode: str,
        version: str,
        queues: dict[str, tuple[int, int]],
        workers: dict[str, float] | None = None,
        bus: BusSample | None = None,
    ) -> ListenerStats:
        with self._lock:
            return ListenerStats(
                app=app,
                mode=mode,
                version=version,
                received=dict(self.received),
                dropped=dict(self.dropped),
                delivery_failures=dict(self.delivery_failures),
                parse_errors=self.parse_errors,
                errors=dict(self.errors),
                queues=dict(queues),
                delivered=dict(self.delivered),
                workers=dict(workers or {}),
                bus=bus,
            )
