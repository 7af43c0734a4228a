"""Between Spark's callback thread and everything else: a bounded queue and one worker thread."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import AppInfo, EventKind, ParsedEvent
from sparkwatch.model.parse import EventParseError, listener_event
from sparkwatch.worker import BoundedQueue, Worker

log = logging.getLogger(__name__)

Handler = Callable[[ParsedEvent], None]
_STOP = None
Item = tuple[EventKind, str, float] | None


class Intake:
    """Receives raw event JSON (cheaply, on Spark's thread) and parses it on its own worker."""

    QUEUE = "intake"

    def __init__(
        self,
        app: AppInfo,
        capacity: int,
        counters: ListenerCounters,
        handlers: Sequence[tuple[str, Handler]],
    ) -> None:
        self._app = app
        self._counters = counters
        self._handlers = list(handlers)
        self._queue: BoundedQueue[Item] = BoundedQueue(capacity)
        self.worker = Worker("intake", self._run, "sparkwatch-intake")
        self.worker.start()

    def offer(self, kind: EventKind, raw_json: str) -> None:
        """Called on Spark's callback thread: count, enqueue or count the drop, return."""
        self._counters.count_received(kind.value)
        if not self._queue.offer((kind, raw_json, time.time())):
            self._counters.count_dropped(self.QUEUE)

    def queue_state(self) -> tuple[int, int]:
        return self._queue.size(), self._queue.capacity

    def flush(self, timeout: float) -> bool:
        return self._queue.wait_drained(timeout)

    def stop(self, timeout: float) -> None:
        end = time.monotonic() + timeout  # one deadline for the queue and the thread
        if self._queue.put_control(_STOP, timeout):
            self.worker.join(max(0.0, end - time.monotonic()))

    def _run(self) -> None:
        while True:
            item = self.worker.take(self._queue)
            try:
                if item is _STOP:
                    return
                self._process(*item)
            finally:
                self._queue.done()
                self.worker.beat()

    def _process(self, kind: EventKind, raw_json: str, received_at: float) -> None:
        try:
            parsed = listener_event(kind, raw_json, self._app, received_at)
        except EventParseError as exc:
            self._counters.count_parse_error()
            log.warning("sparkwatch: ignoring a %s event Spark sent: %s", kind.value, exc)
            return
        for name, handler in self._handlers:
            try:
                handler(parsed)
            except Exception:  # noqa: BLE001 - one failing sink must not starve the others
                self._counters.count_delivery_failure(name)
                log.exception("sparkwatch: %s failed to take a %s event", name, kind.value)
