"""Small measurements over a run's batches that several checks share, and how to word them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sparkwatch.doctor.model import BatchPoint, OperatorPoint

MIN_BATCHES = 3
"""Fewer batches say nothing about a trend."""


def batch_range(first: int, last: int) -> str:
    return f"batch {first}" if first == last else f"batches {first}–{last}"


def count(n: float) -> str:
    return f"{n:,.0f}"


def seconds(s: float) -> str:
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


@dataclass(frozen=True, slots=True)
class Growth:
    first_batch: int
    last_batch: int
    first_rows: int
    last_rows: int
    removed: int
    batches: int

    @property
    def per_batch(self) -> float:
        return (self.last_rows - self.first_rows) / max(1, self.batches - 1)

    @property
    def growing(self) -> bool:
        """Rows went up over enough batches and nothing was ever removed."""
        return self.batches >= MIN_BATCHES and self.last_rows > self.first_rows and not self.removed

    def text(self) -> str:
        span = batch_range(self.first_batch, self.last_batch)
        return (
            f"state rows grew from {count(self.first_rows)} to {count(self.last_rows)} over "
            f"{span} (+{count(self.per_batch)} per batch) and {count(self.removed)} were removed"
        )


def growth(points: Sequence[OperatorPoint]) -> Growth:
    return Growth(
        first_batch=points[0].batch_id,
        last_batch=points[-1].batch_id,
        first_rows=points[0].rows_total,
        last_rows=points[-1].rows_total,
        removed=sum(p.rows_removed for p in points),
        batches=len(points),
    )


@dataclass(frozen=True, slots=True)
class Lateness:
    seconds: float
    batch_id: int


def lateness(batches: Sequence[BatchPoint]) -> Lateness | None:
    """How far the oldest row of a batch was behind the newest event time of the batches before:
    the delay a watermark needs to keep it. None without two batches that had data."""
    newest: float | None = None
    worst: Lateness | None = None
    for b in batches:
        if b.event_time_min is None or b.event_time_max is None:
            continue
        if newest is not None:
            behind = max(0.0, newest - b.event_time_min)
            if worst is None or behind > worst.seconds:
                worst = Lateness(behind, b.batch_id)
        newest = b.event_time_max if newest is None else max(newest, b.event_time_max)
    return worst


def estimated_delay_ms(batches: Sequence[BatchPoint]) -> int | None:
    """The watermark delay as the progress shows it (newest event time so far - watermark)."""
    newest: float | None = None
    for b in batches:
        if newest is not None and b.watermark and b.watermark > 0:
            return int(round((newest - b.watermark) * 1000))
        if b.event_time_max is not None:
            newest = b.event_time_max if newest is None else max(newest, b.event_time_max)
    return None


_NICE_DELAYS = (
    (10, "10 seconds"), (30, "30 seconds"), (60, "1 minute"), (120, "2 minutes"),
    (300, "5 minutes"), (600, "10 minutes"), (900, "15 minutes"), (1800, "30 minutes"),
    (3600, "1 hour"), (7200, "2 hours"), (21_600, "6 hours"), (43_200, "12 hours"),
    (86_400, "1 day"), (172_800, "2 days"), (604_800, "7 days"),
)


def watermark_text(s: float) -> str:
    """The smallest readable ``withWatermark`` delay of at least ``s`` seconds."""
    for size, text in _NICE_DELAYS:
        if s <= size:
            return text
    return f"{math.ceil(s / 86_400)} days"
