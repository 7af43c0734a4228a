"""A bounded hand-off queue that never blocks the producer and can be waited on until drained."""

from __future__ import annotations

import queue
import time
from typing import Generic, TypeVar

T = TypeVar("T")


class BoundedQueue(Generic[T]):
    """``queue.Queue`` with non-blocking offers and a drain wait with a deadline."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._queue: queue.Queue[T] = queue.Queue(maxsize=capacity)

    def offer(self, item: T) -> bool:
        """Enqueue without blocking; False when full (the caller counts the drop)."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def put_control(self, item: T, timeout: float) -> bool:
        """Enqueue a control item (e.g. stop), waiting up to ``timeout`` for room."""
        try:
            self._queue.put(item, timeout=timeout)
        except queue.Full:
            return False
        return True

    def get(self, timeout: float | None = None) -> T:
        """Next item; raises ``queue.Empty`` after ``timeout``."""
        return self._queue.get(timeout=timeout)

    def get_nowait(self) -> T:
        return self._queue.get_nowait()

    def done(self, n: int = 1) -> None:
        """Mark ``n`` items fully processed (what :meth:`wait_drained` waits for)."""
        for _ in range(n):
            self._queue.task_done()

    def size(self) -> int:
        return self._queue.qsize()

    def wait_drained(self, timeout: float) -> bool:
        """Wait until every item offered so far was processed; False on timeout."""
        deadline = time.monotonic() + timeout
        cond = self._queue.all_tasks_done
        with cond:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                cond.wait(remaining)
        return True
