"""What doctor reads (one run of a query: batches, operators, plan) and what it reports."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from sparkwatch.history.views import StatePoint
from sparkwatch.plan.kinds import kind_of
from sparkwatch.plan.model import OperatorIdentity, QueryPlan, Source


class Severity(IntEnum):
    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.strip().upper()]


@dataclass(frozen=True, slots=True)
class BatchPoint:
    """One progress of the run (times in epoch seconds, durations in ms)."""

    batch_id: int
    timestamp: float
    duration_ms: int
    input_rows: int
    event_time_min: float | None = None
    event_time_max: float | None = None
    watermark: float | None = None


@dataclass(frozen=True, slots=True)
class QueryRecord:
    """The most recent run of a query with batches: what every check looks at."""

    query_id: str
    name: str | None
    run_id: str
    batches: tuple[BatchPoint, ...]
    """Oldest first."""
    operators: Mapping[int, tuple[StatePoint, ...]]
    """Per operator index, oldest first (as the history holds them: the field table's fields)."""
    plan: QueryPlan | None = None

    @property
    def title(self) -> str:
        return self.name or self.query_id

    def identity(self, index: int) -> OperatorIdentity:
        """What operator ``index`` is: from the plan when read, else its progress name."""
        plan_op = self.plan.operator(index) if self.plan is not None else None
        if plan_op is not None:
            return plan_op
        points = self.operators.get(index, ())
        name = points[-1].operator_name if points else "unknown"
        return OperatorIdentity(index=index, operator=name, kind=kind_of(name))

    @property
    def plan_read(self) -> bool:
        return self.plan is not None and self.plan.source is Source.PLAN


@dataclass(frozen=True, slots=True)
class Finding:
    code: str
    severity: Severity
    query_id: str
    query_name: str | None
    run_id: str
    title: str
    evidence: tuple[str, ...]
    fix: str
    operator_index: int | None = None
    operator: str | None = None
    batches: tuple[int, int] | None = None
    """First and last batch id the evidence covers."""
    numbers: Mapping[str, Any] = field(default_factory=dict)
    """The evidence as numbers, for JSON consumers."""
