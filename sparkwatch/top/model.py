"""What `sparkwatch top` shows: a snapshot of queries and their state operators, from any source.

Sources (an exporter's or a collector's /metrics, the history database) fill the same records;
growth (state rows per second) needs two observations and is computed by :mod:`.rates`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class TopOperator:
    index: int
    operator: str
    kind: str = ""
    identity: str = ""
    """One-line identity from the plan (kind, keys, mode, watermark, stores, provider)."""
    rows: float | None = None
    updated: float | None = None
    removed: float | None = None
    dropped: float | None = None
    """Updated, removed and dropped: in the last batch."""
    totals: tuple[float, float, float] | None = None
    """Updated, removed and dropped since the run began (the counters): where a source has no
    last-batch figures (the default metric profile), :mod:`.rates` derives them from these."""
    memory_bytes: float | None = None
    commit_seconds: float | None = None
    growth: float | None = None
    """State rows per second between the last two observations."""


@dataclass(slots=True)
class TopQuery:
    app_id: str
    query_id: str
    name: str = ""
    app_name: str = ""
    run_id: str = ""
    status: str = "active"
    batch_id: float | None = None
    batch_seconds: float | None = None
    lag_seconds: float | None = None
    """Watermark lag (processing time - watermark), else event-time lag."""
    input_rate: float | None = None
    processed_rate: float | None = None
    operators: list[TopOperator] = field(default_factory=list)

    @property
    def title(self) -> str:
        return self.name or self.query_id

    @property
    def key(self) -> tuple[str, str]:
        return (self.app_id, self.query_id)

    @property
    def rows(self) -> float | None:
        values = [op.rows for op in self.operators if op.rows is not None]
        return sum(values) if values else None

    @property
    def growth(self) -> float | None:
        values = [op.growth for op in self.operators if op.growth is not None]
        return sum(values) if values else None

    def text(self) -> str:
        """Everything a filter matches against."""
        parts = [self.name, self.query_id, self.app_name, self.status]
        for op in self.operators:
            parts += [op.operator, op.kind, op.identity]
        return " ".join(parts).lower()


@dataclass(slots=True)
class Snapshot:
    source: str
    taken_at: float
    queries: list[TopQuery] = field(default_factory=list)
    error: str | None = None
    """Why the source could not be read this time (the last good queries are kept)."""
    note: str | None = None
    """What the source left out of ``queries`` and why, in one line (a history query with a row
    that holds no number): shown under the header, the other queries still shown."""
