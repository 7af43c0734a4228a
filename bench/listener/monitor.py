"""Samples the depth of Spark's ``streams`` listener queue while the queries run."""

from __future__ import annotations

import threading

from bench.sparkenv import ListenerBus

SAMPLE_EVERY_S = 0.25


class QueueMonitor:
    """Peak depth of the ``streams`` queue: how far behind the listeners fell at worst."""

    def __init__(self, bus: ListenerBus) -> None:
        self._bus = bus
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, name="bench-queue-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Event.wait is the sampling period, not synchronisation: stop() ends it at once.
        while not self._stop.wait(SAMPLE_EVERY_S):
            try:
                self.peak = max(self.peak, self._bus.size())
            except Exception:  # noqa: BLE001 - the session is stopping; keep what we have
                return

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak
