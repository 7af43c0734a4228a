"""What the console's pages show, as plain data: filled from the history and the live state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sparkwatch.history.views import StatePoint

RUNNING, IDLE, TERMINATED, FAILED = "running", "idle", "terminated", "failed"
SILENT = "silent"
"""Running by the history, unknown to the live state and without an event for a while: its
driver most likely died without a termination event."""
SILENT_SECONDS = 600.0

OVERVIEW_PAGE = 200
"""Queries on a page of the overview."""
OPERATORS_PAGE = 8
"""Operators charted on a page of a query page."""
TABLE_PAGE = 50
"""Batches in a page of a query page's batches table."""


def attention(status: str) -> int:
    """Where a status comes on the overview: failed queries first, then active ones."""
    return 0 if status == FAILED else 1 if status in (RUNNING, IDLE) else 2


@dataclass(slots=True)
class QueryCounts:
    """Every query the caller may see, not only those of the page shown."""

    total: int = 0
    active: int = 0
    failed: int = 0

    def add(self, status: str, times: int = 1) -> None:
        self.total += times
        rank = attention(status)
        if rank == 0:
            self.failed += times
        elif rank == 1:
            self.active += times


@dataclass(slots=True)
class QueryRow:
    """One query on the overview page (``/``)."""

    query_id: str
    name: str | None
    app_name: str
    status: str
    input_rate: float | None = None
    processed_rate: float | None = None
    state_rows: int | None = None
    state_memory: int | None = None
    watermark_lag: float | None = None
    """Seconds between the last batch's trigger time and its watermark."""
    last_batch_id: int | None = None
    last_batch_at: float | None = None
    last_event_at: float | None = None
    """The history's last event of the query (None for a query the live state alone knows)."""
    spark: list[float] = field(default_factory=list)
    """State rows (every operator's, summed) of the last batches, oldest first."""


@dataclass(frozen=True, slots=True)
class BatchRow:
    timestamp: float
    run_id: str
    batch_id: int
    duration_ms: int
    input_rows: int
    input_rate: float | None
    processed_rate: float | None
    phases: Mapping[str, float]
    watermark: float | None

    @property
    def watermark_lag(self) -> float | None:
        if self.watermark is None or self.watermark <= 0:
            return None  # no watermark yet (Spark reports the epoch)
        return self.timestamp - self.watermark


@dataclass(frozen=True, slots=True)
class BacklogPoint:
    timestamp: float
    behind: float
    """Offsets between the end of the batch and the latest the source reported (summed)."""


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    status: str
    started_at: float | None
    ended_at: float | None
    batches: int
    first_batch_id: int | None
    last_batch_id: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class FindingLink:
    code: str
    severity: str
    title: str
    anchor: str
    """The id of the chart that shows the finding on the query page."""
    operator: str | None
    operator_index: int | None = None


@dataclass(slots=True)
class QueryDetail:
    """Everything the query page (``/queries/<id>``) draws."""

    query_id: str
    name: str | None
    app_name: str
    status: str
    batches: list[BatchRow]
    """Oldest first (the charts' order)."""
    operators: dict[int, list[StatePoint]]
    """Per operator position, oldest first."""
    operator_names: dict[int, str]
    """What each operator is, from the plan when it was read, else its progress name."""
    backlog: list[BacklogPoint]
    runs: list[RunRow]
    table: list[BatchRow]
    """The page of the batches table, newest first."""
    findings: list[FindingLink] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    operator_indexes: list[int] = field(default_factory=list)
    """Every operator position of the query: ``operators`` holds one page of them."""
