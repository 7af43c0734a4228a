"""Start the demo's queries in the background and restart those that fail."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from sparkwatch.demo import queries as dq
from sparkwatch.summary import one_line

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

MAX_RESTARTS = 2


class Supervisor:
    """Starts the queries on its own thread, so the table is live while they come up one by one
    (each ``start()`` takes 0.5-1 s, more under load), then restarts a query that fails.

    Restarts are for the loaded machine: there a Python worker can miss Spark's fixed 10 s
    connect-back timeout and fail its query's first batch. A restart resumes from the checkpoint
    (same query id, new run), which sparkwatch shows as a second run.
    """

    def __init__(self, spark: SparkSession, cfg: dq.DemoConfig, chosen: list[dq.DemoQuery],
                 max_restarts: int = MAX_RESTARTS, check_seconds: float = 2.0) -> None:
        self.notes: list[str] = []
        self._running: dict[str, StreamingQuery] = {}
        self._restarts: dict[str, int] = {}
        self._spark, self._cfg, self._chosen = spark, cfg, chosen
        self._max_restarts, self._check_seconds = max_restarts, check_seconds
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="sparkwatch-demo-start", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def interruptible(self) -> frozenset[str]:
        """The queries a stop may interrupt in a batch (:func:`dq.interruptible`)."""
        return dq.interruptible(self._chosen)

    def finish(self, timeout: float) -> list[StreamingQuery]:
        """Stop starting and restarting; returns the queries started."""
        self._cancel.set()
        if self._thread.ident is not None:  # never started when the demo stopped before
            self._thread.join(timeout)
        with self._lock:
            return list(self._running.values())

    def _run(self) -> None:
        for query in self._chosen:
            if self._cancel.is_set():
                return
            self._start(query)
        while not self._cancel.wait(self._check_seconds):
            for query in self._chosen:
                if not self._cancel.is_set():
                    self._check(query)

    def _start(self, query: dq.DemoQuery) -> None:
        try:
            running = dq.start(self._spark, query, self._cfg)
        except Exception as exc:  # noqa: BLE001 - show it and go on with the others
            self._note(f"could not start {query.name}: {one_line(exc)}")
            return
        with self._lock:
            self._running[query.name] = running

    def _check(self, query: dq.DemoQuery) -> None:
        running = self._running.get(query.name)
        if running is None or running.isActive:
            return
        error = running.exception()
        if error is None:
            return  # stopped, not failed
        restarts = self._restarts.get(query.name, 0)
        if restarts >= self._max_restarts:
            return
        self._restarts[query.name] = restarts + 1
        self._note(f"restarted {query.name} ({restarts + 1}/{self._max_restarts}) after: "
                   f"{one_line(error)}")
        self._start(query)

    def _note(self, text: str) -> None:
        with self._lock:
            self.notes.append(text)


