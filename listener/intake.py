"""Between Spark's callback thread and everything else: a bounded queue and one worker thread."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial

from sparkwatch.listener.stage import Chore, QueuedStage
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import AppInfo, EventKind, ParsedEvent
from sparkwatch.model.parse import EventParseError, listener_event
from sparkwatch.worker import BoundedQueue, Worker

log = logging.getLogger(__name__)

Handler = Callable[[ParsedEvent], None]
Item = tuple[EventKind, str, float]


class Intake(QueuedStage[Item]):
    """Receives raw event JSON (cheaply, on Spark's thread) and parses it on its own worker."""

    QUEUE = "intake"

    def __init__(
        self,
        app: AppInfo,
        capacity: int,
        counters: ListenerCounters,
        handlers: Sequence[tuple[str, Handler]],
        tidy: Callable[[], object] | None = None,
        tidy_seconds: float = 5.0,
    ) -> None:
        """``tidy`` runs on the worker every ``tidy_seconds``, idle or busy (attach() forgets
        ended queries with it, whatever the exporters)."""
        self._app = app
        self._counters = counters
        self._handlers = list(handlers)
        self._chore = Chore(partial(self._tidy, tidy), tidy_seconds) if tidy else None
        self._tidy_failed = False
        self._queue: BoundedQueue[Item | None] = BoundedQueue(capacity)
        self.worker = Worker("intake", self._run, "sparkwatch-intake")
        self.worker.start()

    def offer(self, kind: EventKind, raw_json: str) -> None:
        """Called on Spark's callback thread: count, enqueue or count the drop, return."""
        self._counters.count_received(kind.value)
        if not self._queue.offer((kind, raw_json, time.time())):
            self._counters.count_dropped(self.QUEUE)

    def _run(self) -> None:
        self._serve(lambda item: self._process(*item), self._chore)

    def _tidy(self, tidy: Callable[[], object]) -> None:
        try:
            tidy()
        except Exception:  # noqa: BLE001 - events go on; the next round tries again
            self._counters.count_error("tidy")
            # Logged once: it runs every few seconds and would otherwise flood the driver log.
            if not self._tidy_failed:
                log.exception("sparkwatch: tidying the listener's state failed (said once)")
            self._tidy_failed = True

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
