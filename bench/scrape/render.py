"""Rendering the exposition in this process, before and after the direct text renderer: the same
MetricState and registry as the collector's, rendered by prometheus_client's ``generate_latest``
(what /metrics did before) and by :func:`sparkwatch.metrics.text.generate` (what it does now).
Both must give the same bytes; only the time differs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from bench.scrape.fleet import AppFleet
from bench.scrape.measure import Latency
from sparkwatch.collector.stalls import StallBoard, StalledGauge
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.text import generate
from sparkwatch.model.parse import envelope_from_dict, parse_envelope


class RenderMismatch(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Rendered:
    prometheus_client: Latency
    sparkwatch: Latency
    bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def registry_of(apps: Sequence[AppFleet], batches: int) -> CollectorRegistry:
    state = MetricState()
    for app in apps:
        for envelope in app.events(batches):
            state.apply(parse_envelope(envelope_from_dict(envelope)))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state))
    registry.register(StalledGauge(state, StallBoard()))
    return registry


def compare(apps: Sequence[AppFleet], batches: int, renders: int) -> Rendered:
    """``renders`` timed renders each, taking turns; the outputs must be identical."""
    registry = registry_of(apps, batches)
    before, after = generate_latest(registry), b"".join(generate(registry))
    if before != after:
        raise RenderMismatch("sparkwatch.metrics.text.generate differs from generate_latest")
    slow, fast = [], []
    for _ in range(renders):
        slow.append(_timed(lambda: generate_latest(registry)))
        fast.append(_timed(lambda: b"".join(generate(registry))))
    return Rendered(Latency.of(slow), Latency.of(fast), len(after))


def _timed(render: Callable[[], bytes]) -> float:
    start = time.perf_counter()
    render()
    return time.perf_counter() - start
