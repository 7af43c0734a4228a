"""Partition skew figures: the largest partition against the median one."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from sparkwatch.state.model import Partition


@dataclass(frozen=True, slots=True)
class Skew:
    max_rows: int
    median_rows: float
    max_bytes: int
    median_bytes: float
    ratio: float
    """Largest partition's bytes over the median partition's (1.0 when even; the max over 1 byte
    when the median partition is empty)."""
    worst: tuple[Partition, ...]


def skew(partitions: Sequence[Partition], worst: int = 3) -> Skew:
    if not partitions:
        return Skew(0, 0.0, 0, 0.0, 1.0, ())
    rows = [p.rows for p in partitions]
    sizes = [p.bytes for p in partitions]
    med = float(statistics.median(sizes))
    biggest = max(sizes)
    ratio = 1.0 if biggest == 0 else biggest / max(med, 1.0)
    ranked = sorted(partitions, key=lambda p: (-p.bytes, -p.rows, p.partition_id))
    return Skew(max(rows), float(statistics.median(rows)), biggest, med, ratio,
                tuple(p for p in ranked[:worst] if p.rows))
