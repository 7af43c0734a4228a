"""One background worker: a daemon thread with a heartbeat, a backoff, and (when it has one) a
bounded hand-off queue. Every long-running thread of the listener and the collector is one.

Standard library only: the listener runs these in the Spark driver.

The heartbeat says the worker's loop is turning. It beats after every unit of work and while the
worker waits (for work, or between retries), never while it is inside a call. So an idle worker
is not hung, and a worker stuck in a call that does not return (a database that never answers, a
child process that is stopped) stops beating: once its heartbeat is older than its deadline it is
reported ``hung``; a thread that ended on an exception is ``dead``.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
State = Literal["ok", "hung", "dead", "stopped"]

DEFAULT_DEADLINE_SECONDS = 120.0
BEAT_SECONDS = 1.0
"""Longest gap between beats of a waiting worker (a quarter of the deadline when that is less)."""


class BoundedQueue(Generic[T]):
    """``queue.Queue`` with non-blocking offers and a drain wait with a deadline."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._queue: queue.Queue[T] = queue.Queue(maxsize=capacity)
        self._controls: list[T] = []
        """The control items ever put (told apart by identity; in practice one, the stop)."""

    def offer(self, item: T) -> bool:
        """Enqueue without blocking; False when full (the caller counts the drop)."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def offer_evicting(self, item: T) -> int:
        """Enqueue without blocking; when full, the oldest item makes room. Returns how many
        items were evicted (the caller counts them dropped)."""
        q = self._queue
        with q.not_full:  # the queue's own lock: the eviction and the put are one step
            evicted = 0
            while q.maxsize > 0 and len(q.queue) >= q.maxsize:
                q.queue.popleft()
                evicted += 1
            q.queue.append(item)
            # An evicted item will never be marked done: it counts as done now.
            q.unfinished_tasks += 1 - evicted
            q.not_empty.notify()
        return evicted

    def put_control(self, item: T, timeout: float) -> bool:
        """Enqueue a control item (e.g. stop), waiting up to ``timeout`` for room. A control
        item is no work: :meth:`waiting` and :meth:`unfinished` do not count it."""
        with self._queue.mutex:
            if not any(item is c for c in self._controls):
                self._controls.append(item)
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

    def waiting(self) -> int:
        """Items queued, control items not counted."""
        with self._queue.mutex:
            return self._waiting_locked()

    def unfinished(self) -> int:
        """Items offered and not yet marked done, control items not counted: what waits and
        what a consumer took and still handles (for a consumer that marks a control item done
        as soon as it takes it)."""
        with self._queue.mutex:
            controls = len(self._queue.queue) - self._waiting_locked()
            return self._queue.unfinished_tasks - controls

    def _waiting_locked(self) -> int:
        controls = self._controls
        return sum(1 for item in self._queue.queue if not any(item is c for c in controls))

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


class Backoff:
    """Waits between attempts after consecutive failures: doubling from ``first`` up to
    ``ceiling``, with jitter (× 0.5 to 1.5, never above ``ceiling``) so that many clients that
    failed together do not retry together."""

    def __init__(self, first: float, ceiling: float) -> None:
        self.first = first
        self.ceiling = ceiling
        self.failures = 0
        self._delay = first

    def failed(self) -> float:
        """Count a failure; returns the wait before the next attempt."""
        self.failures += 1
        wait = min(self._delay * random.uniform(0.5, 1.5), self.ceiling)
        self._delay = min(self._delay * 2, self.ceiling)
        return wait

    def succeeded(self) -> int:
        """Reset; returns how many failures came before (0: there was no outage)."""
        failures, self.failures, self._delay = self.failures, 0, self.first
        return failures

    @property
    def loud(self) -> bool:
        """Whether to log this failure: the first of an outage and every 20th after it."""
        return self.failures == 1 or self.failures % 20 == 0


@dataclass(frozen=True, slots=True)
class Health:
    name: str
    state: State
    last_progress: float
    """Unix time of the last beat."""
    seconds_since_progress: float
    deadline_seconds: float

    @property
    def ok(self) -> bool:
        return self.state in ("ok", "stopped")


class Worker:
    """A named daemon thread running ``run`` (which loops until its own stop condition), with
    the heartbeat and waits that beat."""

    def __init__(self, name: str, run: Callable[[], None], thread_name: str,
                 deadline: float = DEFAULT_DEADLINE_SECONDS) -> None:
        self.name = name
        self.deadline = deadline
        self._run = run
        self._beat_every = min(BEAT_SECONDS, deadline / 4)
        self._beat_mono = time.monotonic()
        self._beat_wall = time.time()
        self._failed = False
        self._thread = threading.Thread(target=self._main, name=thread_name, daemon=True)

    def start(self) -> None:
        self.beat()
        self._thread.start()

    def join(self, timeout: float | None) -> None:
        self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def beat(self) -> None:
        """The loop turned: called after each unit of work, and by the waits below."""
        self._beat_mono = time.monotonic()
        self._beat_wall = time.time()

    @property
    def last_progress(self) -> float:
        """Unix time of the last beat (the ``..._worker_last_progress_timestamp_seconds``)."""
        return self._beat_wall

    def health(self) -> Health:
        age = time.monotonic() - self._beat_mono
        state: State = "ok"
        if not self._thread.is_alive():
            state = "dead" if self._failed else "stopped"
        elif age > self.deadline:
            state = "hung"
        return Health(self.name, state, self._beat_wall, age, self.deadline)

    def wait(self, seconds: float, until: threading.Event) -> bool:
        """Wait ``seconds`` (or until ``until`` is set), beating; True when ``until`` is set."""
        end = time.monotonic() + seconds
        while (remaining := end - time.monotonic()) > 0:
            if until.wait(min(remaining, self._beat_every)):
                self.beat()
                return True
            self.beat()
        return until.is_set()

    def take(self, q: BoundedQueue[T], timeout: float | None = None) -> T:
        """The next item of ``q``, beating while none comes; ``queue.Empty`` after ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            step = self._beat_every if end is None else min(self._beat_every,
                                                             end - time.monotonic())
            try:
                item = q.get(timeout=step) if step > 0 else q.get_nowait()
            except queue.Empty:
                self.beat()
                if end is not None and time.monotonic() >= end:
                    raise
                continue
            self.beat()
            return item

    def _main(self) -> None:
        try:
            self._run()
        except BaseException:
            self._failed = True
            log.exception("sparkwatch: worker %s ended on an error", self.name)
