"""What the listener's queued stages share: a bounded queue drained by one worker thread, where
``None`` queued is the stop."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from sparkwatch.worker import BoundedQueue, Worker

T = TypeVar("T")


class QueuedStage(Generic[T]):
    """Mixed into a stage that sets ``_queue`` and ``worker`` in its ``__init__``."""

    _queue: BoundedQueue[T | None]
    worker: Worker

    def queue_state(self) -> tuple[int, int]:
        """Items waiting and the capacity (the listener queue gauges)."""
        return self._queue.size(), self._queue.capacity

    def flush(self, timeout: float) -> bool:
        """Wait until every item queued so far was handled; False on timeout."""
        return self._queue.wait_drained(timeout)

    def _serve(self, handle: Callable[[T], None]) -> None:
        """The worker's loop: ``handle`` the items one by one until the stop comes; each, the
        stop too, is marked done and followed by a beat (the stage is alive between items)."""
        while True:
            item = self.worker.take(self._queue)
            try:
                if item is None:
                    return
                handle(item)
            finally:
                self._queue.done()
                self.worker.beat()

    def stop(self, timeout: float) -> None:
        """Queue the stop behind what waits and join the thread, both within ``timeout``."""
        end = time.monotonic() + timeout
        if self._queue.put_control(None, timeout):
            self.worker.join(max(0.0, end - time.monotonic()))
