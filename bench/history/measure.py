"""Timing of read cases: warm-up, then N timed repetitions, percentiles of the durations."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.timing import percentile

TARGET_P95_MS = 100.0
MIN_REPETITIONS = 3


@dataclass(frozen=True, slots=True)
class Case:
    group: str
    """``reader`` (HistoryReader in-process), ``http`` (the collector's read API) or
    ``dashboard`` (a History panel or variable query)."""
    name: str
    range: str
    selection: str
    run: Callable[[int], int]
    """Runs repetition ``i`` (parameters vary with it) and returns the rows it got."""
    variants: int = 1
    """How many different parameter sets ``run`` rotates over (each is warmed up)."""


@dataclass(frozen=True, slots=True)
class Result:
    case: Case
    samples_ms: list[float]
    rows: list[int]
    error: str | None = None

    def p(self, q: float) -> float | None:
        return percentile(sorted(self.samples_ms), q) if self.samples_ms else None

    @property
    def max_ms(self) -> float | None:
        return max(self.samples_ms) if self.samples_ms else None

    @property
    def over_target(self) -> bool:
        p95 = self.p(95)
        return p95 is not None and p95 >= TARGET_P95_MS

    def rows_text(self) -> str:
        if not self.rows:
            return "–"
        low, high = min(self.rows), max(self.rows)
        return str(low) if low == high else f"{low}–{high}"


def measure(case: Case, repetitions: int, warmup: int, budget_s: float) -> Result:
    """Warm-up runs (untimed: caches, plans, connections; ``warmup`` per parameter variant, so
    the cache is warm for every one), then ``repetitions`` timed ones, fewer (at least
    ``MIN_REPETITIONS``) when they take more than ``budget_s`` in all.

    A failing case is reported with its error rather than stopping the benchmark.
    """
    samples: list[float] = []
    rows: list[int] = []
    try:
        for i in range(warmup * case.variants):
            case.run(i)
        for i in range(repetitions):
            started = time.perf_counter()
            n = case.run(i)
            samples.append((time.perf_counter() - started) * 1000.0)
            rows.append(n)
            if len(samples) >= MIN_REPETITIONS and sum(samples) > budget_s * 1000.0:
                break
    except Exception as exc:  # noqa: BLE001 - reported in the table, the other cases go on
        return Result(case, samples, rows, f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
    return Result(case, samples, rows)


def measure_all(cases: list[Case], repetitions: int, warmup: int, budget_s: float,
                progress: Callable[[Result], None]) -> list[Result]:
    results = []
    for case in cases:
        result = measure(case, repetitions, warmup, budget_s)
        progress(result)
        results.append(result)
    return results
