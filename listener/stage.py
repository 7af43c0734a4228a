"""What the listener's queued stages share: a bounded queue drained by one worker thread, where
``None`` queued is the stop."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from sparkwatch.worker import BoundedQueue, Worker

T = TypeVar("T")


@dataclass
class Chore:
    """Work a stage's worker does besides its items, at most every ``seconds``, idle or busy
    (the intake forgets ended queries this way: a scrape may never come)."""

    run: Callable[[], None]
    seconds: float
    due: float = field(default_factory=time.monotonic)

    def left(self) -> float:
        """Seconds until it is due (0 when it is)."""
        return max(0.0, self.due - time.monotonic())

    def run_if_due(self) -> None:
        if time.monotonic() >= self.due:
            self.due = time.monotonic() + self.seconds
            self.run()


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

    def held(self) -> int:
        """Items queued or in hand, the stop not counted (said at detach when the stage is
        still busy at its deadline)."""
        return self._queue.unfinished()

    def _serve(self, handle: Callable[[T], None], chore: Chore | None = None) -> None:
        """The worker's loop: ``handle`` the items one by one until the stop comes; each, the
        stop too, is marked done and followed by a beat (the stage is alive between items).
        ``chore`` (which must not raise) runs whenever it is due, between items or while idle."""
        while True:
            if chore is not None:
                chore.run_if_due()
            try:
                item = self.worker.take(self._queue, None if chore is None else chore.left())
            except queue.Empty:  # only with a chore: it is due
                continue
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
