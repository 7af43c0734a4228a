"""State growth across scrapes of /metrics: rows are a level that moves once per batch, so growth
is measured over a sliding window of observations (up to ``window`` seconds), not between two
scrapes a second apart."""

from __future__ import annotations

from collections import deque

from sparkwatch.top.model import Snapshot

Key = tuple[str, str, str, int]
WINDOW_SECONDS = 60.0


class GrowthTracker:
    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self._window = window
        self._seen: dict[Key, deque[tuple[float, float]]] = {}

    def update(self, snap: Snapshot) -> Snapshot:
        if snap.error:
            return snap  # a failed scrape says nothing about growth
        for query in snap.queries:
            for op in query.operators:
                if op.rows is None or op.growth is not None:
                    continue
                # The run id is in the key: a restart (state reloaded) is not growth.
                key = (query.app_id, query.query_id, query.run_id, op.index)
                history = self._seen.setdefault(key, deque())
                history.append((snap.taken_at, op.rows))
                while len(history) > 2 and snap.taken_at - history[1][0] >= self._window:
                    history.popleft()
                first_time, first_rows = history[0]
                if snap.taken_at > first_time:
                    op.growth = (op.rows - first_rows) / (snap.taken_at - first_time)
        return snap
