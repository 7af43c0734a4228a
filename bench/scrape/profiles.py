"""The metric profiles side by side: the same fleet's exposition under ``default`` and ``full``,
rendered in this process (collection from the metric state included, as /metrics does it)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.scrape.fleet import AppFleet
from bench.scrape.measure import Latency
from bench.scrape.render import registry_of, timed
from sparkwatch.metrics.profiles import PROFILES, select
from sparkwatch.metrics.text import generate

CATALOGUE_PREFIX = b"spark_streaming_"


@dataclass(frozen=True, slots=True)
class ProfileRender:
    profile: str
    queries: int
    series: int
    """``spark_streaming_*`` sample lines"""
    bytes: int
    render: Latency
    cpu: Latency
    """CPU time of the same renders (process time): what the render costs on a shared machine,
    where wall time includes waiting for a core."""

    @property
    def per_query(self) -> float:
        return self.series / self.queries

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_query": self.per_query}


def catalogue_series(body: bytes) -> int:
    return sum(1 for line in body.splitlines() if line.startswith(CATALOGUE_PREFIX))


def measure(apps: Sequence[AppFleet], batches: int, profile: str, renders: int) -> ProfileRender:
    """``renders`` timed renders of the fleet under ``profile`` (after one untimed)."""
    registry = registry_of(apps, batches, select(profile))
    body = b"".join(generate(registry))
    wall, cpu = [], []
    for _ in range(renders):
        started = time.process_time()
        wall.append(timed(lambda: b"".join(generate(registry))))
        cpu.append(time.process_time() - started)
    queries = sum(app.fleet.queries for app in apps)
    return ProfileRender(profile, queries, catalogue_series(body), len(body), Latency.of(wall),
                         Latency.of(cpu))


def compare(apps: Sequence[AppFleet], batches: int, renders: int) -> dict[str, Any]:
    """Every profile, one after the other (each holds its own metric state)."""
    return {name: measure(apps, batches, name, renders).to_dict() for name in PROFILES}
