"""Timing of Py4J callbacks: wrap a listener object's method where Py4J will call it.

Py4J's callback server calls ``getattr(proxy, name)(*args)`` on the object the JVM holds, so
replacing the attribute on that instance times exactly what runs on Spark's listener thread for
each event (for the public path that includes ``QueryProgressEvent.fromJObject``), whichever API
registered the object. Both listeners are measured the same way.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

AfterCall = Callable[[int, Any], None]
"""Called after the timed call with (start perf_counter_ns, the JVM event); not timed."""


@dataclass(frozen=True, slots=True)
class Summary:
    n: int
    median_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of already sorted values."""
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize_ns(samples_ns: list[int]) -> Summary | None:
    if not samples_ns:
        return None
    ms = sorted(s / 1e6 for s in samples_ns)
    return Summary(
        n=len(ms),
        median_ms=percentile(ms, 50),
        p90_ms=percentile(ms, 90),
        p99_ms=percentile(ms, 99),
        mean_ms=sum(ms) / len(ms),
        max_ms=ms[-1],
    )


class CallbackTimer:
    """Durations of one callback method of one Py4J proxy object."""

    def __init__(self) -> None:
        self.samples_ns: list[int] = []

    @property
    def calls(self) -> int:
        return len(self.samples_ns)

    def wrap(self, proxy: Any, method: str, after: AfterCall | None = None) -> None:
        original = getattr(proxy, method)
        samples = self.samples_ns  # one callback thread appends; list.append is atomic anyway

        def timed(jevent: Any) -> Any:
            start = time.perf_counter_ns()
            try:
                return original(jevent)
            finally:
                samples.append(time.perf_counter_ns() - start)
                if after is not None:
                    after(start, jevent)

        setattr(proxy, method, timed)

    def summary(self) -> Summary | None:
        return summarize_ns(self.samples_ns)


def find_proxy(spark: Any, match: Callable[[Any], bool], what: str) -> Any:
    """The one object in Py4J's proxy pool (objects handed to the JVM) that ``match`` accepts."""
    pool = spark.sparkContext._gateway.gateway_property.pool
    with pool.lock:
        found = [obj for obj in pool.dict.values() if match(obj)]
    if len(found) != 1:
        raise RuntimeError(f"expected one {what} in Py4J's proxy pool, found {len(found)}")
    return found[0]
