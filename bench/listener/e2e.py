"""Latency from a progress callback to the new batch being visible on the listener's /metrics
and in its SQL history.

After a timed callback returns, the probe is handed the JVM event; it reads the event's query id
and batch id (off the callback thread), scrapes ``/metrics`` back to back until
``spark_streaming_query_batch_id`` for that query reaches the batch, and polls the history
(SQLite, read-only) every ``HISTORY_POLL_S`` until the batch's row is there. Latencies are taken
from callback entry, so the /metrics one includes one scrape. At most one probe starts per
``MIN_INTERVAL_S`` and only one runs at a time; other events are skipped. A scrape of 12 queries
costs tens of ms of Python; probing every event would steal a core from Spark on a 2-core driver
and slow the very run it measures.
"""

from __future__ import annotations

import json
import queue
import sqlite3
import threading
import time
import urllib.request
from typing import Any

from sparkwatch.metrics.catalogue import QUERY_BATCH_ID

PROBE_DEADLINE_S = 10.0
MIN_INTERVAL_S = 1.0
HISTORY_POLL_S = 0.002


class MetricsProbe:
    def __init__(self, port: int, history_file: str | None = None) -> None:
        self._url = f"http://127.0.0.1:{port}/metrics"
        self._history_file = history_file
        self._pending: queue.Queue[tuple[int, Any] | None] = queue.Queue(maxsize=1)
        self.latencies_ns: list[int] = []
        self.history_latencies_ns: list[int] = []
        self.scrape_ns: list[int] = []
        self.skipped = 0
        self.timeouts = 0
        self.history_timeouts = 0
        self._next_ns = 0
        self._thread = threading.Thread(target=self._run, name="bench-e2e-probe", daemon=True)
        self._thread.start()

    def offer(self, start_ns: int, jevent: Any) -> None:
        """Called on the callback thread after timing: never blocks."""
        if start_ns < self._next_ns:
            self.skipped += 1
            return
        try:
            self._pending.put_nowait((start_ns, jevent))
        except queue.Full:
            self.skipped += 1
            return
        self._next_ns = start_ns + int(MIN_INTERVAL_S * 1e9)

    def stop(self, timeout: float) -> None:
        try:
            self._pending.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._pending.get()
            if item is None:
                return
            start_ns, jevent = item
            progress = json.loads(jevent.json())["progress"]
            self._wait_visible(start_ns, progress["id"], int(progress["batchId"]))

    def _wait_visible(self, start_ns: int, query_id: str, batch_id: int) -> None:
        deadline = time.perf_counter_ns() + int(PROBE_DEADLINE_S * 1e9)
        on_metrics = False
        in_history = self._history_file is None
        while time.perf_counter_ns() < deadline and not (on_metrics and in_history):
            if not on_metrics:
                value = self._scrape_batch_id(query_id)
                if value is not None and value >= batch_id:
                    on_metrics = True
                    self.latencies_ns.append(time.perf_counter_ns() - start_ns)
            if not in_history:
                if self._history_has(query_id, batch_id):
                    in_history = True
                    self.history_latencies_ns.append(time.perf_counter_ns() - start_ns)
                elif on_metrics:
                    time.sleep(HISTORY_POLL_S)  # a polling interval (resolution), not a wait
        self.timeouts += not on_metrics
        self.history_timeouts += not in_history

    def _history_has(self, query_id: str, batch_id: int) -> bool:
        assert self._history_file is not None
        try:
            with sqlite3.connect(f"file:{self._history_file}?mode=ro", uri=True,
                                 timeout=1) as conn:
                row = conn.execute("select 1 from batches where query_id = ? and batch_id = ?",
                                   (query_id, batch_id)).fetchone()
        except sqlite3.Error:  # not created yet, or locked by the writer's commit
            return False
        return row is not None

    def _scrape_batch_id(self, query_id: str) -> float | None:
        begin = time.perf_counter_ns()
        with urllib.request.urlopen(self._url, timeout=5) as response:
            body = response.read().decode()
        self.scrape_ns.append(time.perf_counter_ns() - begin)
        return batch_id_in(body, query_id)


def batch_id_in(exposition: str, query_id: str) -> float | None:
    """The value of the batch-id gauge for ``query_id`` in a Prometheus text exposition."""
    prefix = QUERY_BATCH_ID.name + "{"
    needle = f'query_id="{query_id}"'
    for line in exposition.splitlines():
        if line.startswith(prefix) and needle in line:
            return float(line.rsplit(" ", 1)[1])
    return None
