"""State growth across scrapes of /metrics: rows are a level that moves once per batch, so growth
is measured over a sliding window of observations (up to ``window`` seconds), not between two
scrapes a second apart."""

from __future__ import annotations

from collections import deque

from sparkwatch.top.model import Snapshot, TopOperator

Key = tuple[str, str, str, int]
WINDOW_SECONDS = 60.0


Totals = tuple[float, float, float]


class GrowthTracker:
    def __init__(self, window: float = WINDOW_SECONDS) -> None:
        self._window = window
        self._seen: dict[Key, deque[tuple[float, float]]] = {}
        self._batches = LastBatches()

    def update(self, snap: Snapshot) -> Snapshot:
        if snap.error:
            return snap  # a failed scrape says nothing about growth
        seen: set[Key] = set()
        for query in snap.queries:
            for op in query.operators:
                # The run id is in the key: a restart (state reloaded) is not growth.
                key = (query.app_id, query.query_id, query.run_id, op.index)
                seen.add(key)
                self._batches.fill(key, query.batch_id, op)
                if op.rows is None or op.growth is not None:
                    continue
                history = self._seen.setdefault(key, deque())
                history.append((snap.taken_at, op.rows))
                while len(history) > 2 and snap.taken_at - history[1][0] >= self._window:
                    history.popleft()
                first_time, first_rows = history[0]
                if snap.taken_at > first_time:
                    op.growth = (op.rows - first_rows) / (snap.taken_at - first_time)
        self._forget_all_but(seen)
        return snap

    def _forget_all_but(self, seen: set[Key]) -> None:
        """Drop what is kept of operators this read no longer has (a run that restarted, a
        query gone): kept, a source whose ids change at every read (restarts over days, a
        hostile peer) grew top's memory by every series it ever served."""
        for gone in self._seen.keys() - seen:
            del self._seen[gone]
        self._batches.forget_all_but(seen)


class LastBatches:
    """Last-batch updated, removed and dropped rows from the run's counters, where the source
    only has those (the default metric profile): the counters' difference between two batch ids
    seen, per batch (exact when the scrapes saw consecutive batches, else the mean)."""

    def __init__(self) -> None:
        self._last: dict[Key, tuple[float, Totals]] = {}
        self._shown: dict[Key, Totals] = {}

    def fill(self, key: Key, batch_id: float | None, op: TopOperator) -> None:
        if op.updated is not None or op.totals is None or batch_id is None:
            return
        before = self._last.get(key)
        if before is not None and batch_id > before[0]:
            batches = batch_id - before[0]
            self._shown[key] = tuple(  # type: ignore[assignment]
                max(0.0, (now - then) / batches) for now, then in zip(op.totals, before[1],
                                                                       strict=True))
        if before is None or batch_id != before[0]:
            self._last[key] = (batch_id, op.totals)
        shown = self._shown.get(key)
        if shown is not None:
            op.updated, op.removed, op.dropped = shown

    def forget_all_but(self, seen: set[Key]) -> None:
        for table in (self._last, self._shown):
            for gone in table.keys() - seen:
                del table[gone]

