"""Small measurements over a run's batches that several checks share, and how to word them."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sparkwatch.doctor.model import BatchPoint
from sparkwatch.history.views import StatePoint

MIN_BATCHES = 3
"""Fewer batches say nothing about a trend."""


def batch_range(first: int, last: int) -> str:
    return f"batch {first}" if first == last else f"batches {first}–{last}"


def count(n: float) -> str:
    """A count with thousands separators; a whole number exactly (through a float, 2**63 - 1
    rows read 9,223,372,036,854,775,808)."""
    return f"{n:,}" if isinstance(n, int) else f"{n:,.0f}"


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


MIN_R_SQUARED = 0.8
"""How well a straight line must explain the rows before doctor calls them growing: flat,
oscillating or stepped-once state fits a line badly (or with slope 0)."""

MIN_RELATIVE_GROWTH = 0.1
"""The fitted growth over the run must be at least a tenth of the state: +1 row on a million
is noise, not a leak."""


@dataclass(frozen=True, slots=True)
class Fit:
    """A least-squares line through (batch id, rows total)."""

    slope: float
    """Rows per batch."""
    r_squared: float
    """Share of the rows' variance the line explains; 0 for constant rows."""


def fit(points: Sequence[StatePoint]) -> Fit:
    xs = [float(p.batch_id) for p in points]
    ys = [float(p.num_rows_total) for p in points]
    if len(points) < 2:
        return Fit(0.0, 0.0)
    try:
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        syy = sum((y - my) ** 2 for y in ys)
        sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
        slope, r_squared = sxy / sxx, sxy * sxy / (sxx * syy)
    except (OverflowError, ZeroDivisionError):
        # Constant rows (no line to fit), or rows past any real count (a SQLite history's 1e308
        # in an integer column): their squares overflow, and doctor ended with a traceback.
        return Fit(0.0, 0.0)
    if not (math.isfinite(slope) and math.isfinite(r_squared)):
        return Fit(0.0, 0.0)
    return Fit(slope, r_squared)


@dataclass(frozen=True, slots=True)
class Growth:
    first_batch: int
    last_batch: int
    first_rows: int
    last_rows: int
    removed: int
    batches: int
    fit: Fit = Fit(0.0, 0.0)

    @property
    def per_batch(self) -> float:
        """The fitted rate, not (last - first) / n: one warm-up step is not a trend."""
        return self.fit.slope

    @property
    def relative(self) -> float:
        """The fitted growth over the run as a share of the last rows."""
        span = self.last_batch - self.first_batch
        return self.fit.slope * span / max(1, self.last_rows)

    @property
    def growing(self) -> bool:
        """Sustained growth: enough batches, a rising line that explains the rows (R² at least
        MIN_R_SQUARED), growth of at least MIN_RELATIVE_GROWTH of the state, nothing removed."""
        return (
            self.batches >= MIN_BATCHES
            and self.fit.slope > 0
            and self.fit.r_squared >= MIN_R_SQUARED
            and self.relative >= MIN_RELATIVE_GROWTH
            and not self.removed
        )

    def text(self) -> str:
        span = batch_range(self.first_batch, self.last_batch)
        verb = "grew" if self.last_rows > self.first_rows else "went"
        return (
            f"state rows {verb} from {count(self.first_rows)} to {count(self.last_rows)} over "
            f"{span} and {count(self.removed)} were removed; least-squares fit "
            f"{self.per_batch:+,.1f} rows per batch with R² {self.fit.r_squared:.2f}"
        )


def growth(points: Sequence[StatePoint]) -> Growth:
    return Growth(
        first_batch=points[0].batch_id,
        last_batch=points[-1].batch_id,
        first_rows=points[0].num_rows_total,
        last_rows=points[-1].num_rows_total,
        removed=sum(p.num_rows_removed for p in points),
        batches=len(points),
        fit=fit(points),
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
