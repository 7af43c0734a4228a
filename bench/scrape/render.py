"""Rendering the exposition in this process, before and after the direct text renderer: the same
MetricState and registry as the collector's, rendered by prometheus_client's ``generate_latest``
(what /metrics did before) and by :func:`sparkwatch.metrics.text.generate` (what it does now).
Both must give the same bytes; only the time differs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest

from bench.scrape.fleet import AppFleet
from bench.scrape.measure import Latency
from sparkwatch.collector.stalls import StallBoard, StalledGauge
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.profiles import FULL, Selection
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


def registry_of(
    apps: Sequence[AppFleet], batches: int, selection: Selection = FULL
) -> CollectorRegistry:
    """The collector's two catalogue collectors over ``apps``' events, as ``selection`` (a
    metric profile) exports them."""
    state = MetricState(batch_buckets=selection.batch_buckets,
                        phase_buckets=selection.phase_buckets)
    for app in apps:
        for envelope in app.events(batches):
            state.apply(parse_envelope(envelope_from_dict(envelope)))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state, selection=selection))
    registry.register(StalledGauge(state, StallBoard(), selection.exports(cat.QUERY_STALLED)))
    return registry


def compare(
    apps: Sequence[AppFleet], batches: int, renders: int, selection: Selection = FULL
) -> Rendered:
    """``renders`` timed renders each, taking turns; the outputs must be identical."""
    registry = registry_of(apps, batches, selection)
    before, after = generate_latest(registry), b"".join(generate(registry))
    if before != after:
        raise RenderMismatch("sparkwatch.metrics.text.generate differs from generate_latest")
    slow, fast = [], []
    for _ in range(renders):
        slow.append(timed(lambda: generate_latest(registry)))
        fast.append(timed(lambda: b"".join(generate(registry))))
    return Rendered(Latency.of(slow), Latency.of(fast), len(after))


def timed(render: Callable[[], bytes]) -> float:
    start = time.perf_counter()
    render()
    return time.perf_counter() - start
