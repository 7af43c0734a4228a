"""The Pushgateway peer: sparkwatch's own exposition of the same events, pushed as one group per
query (``/metrics/job/<app name>/query_id/<id>``) and one per app for app-level series.

The exposition is rendered in this process by prometheus_client's ``generate_latest`` over a
fresh :class:`MetricState` fed the same envelopes, with the collector's two catalogue collectors
(:class:`SparkwatchCollector` and the stall gauge), so both servers hold the same series. The
Pushgateway adds its grouping labels (``job``, ``query_id`` (already there, same value) and
``instance=""``) and ``push_time_seconds`` / ``push_failure_time_seconds`` per group.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import httpx
from prometheus_client import CollectorRegistry, generate_latest

from bench.scrape.fleet import AppFleet
from sparkwatch.collector.stalls import StallBoard, StalledGauge
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.profiles import FULL, Selection
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.parse import envelope_from_dict, parse_envelope

GroupKey = tuple[str, str | None]
"""(app name, query id or None for the app's own series)"""
_APP = re.compile(rb'[{,]app_name="((?:[^"\\]|\\.)*)"')
_QUERY = re.compile(rb'[{,]query_id="([^"]*)"')
_SAFE = re.compile(r"[A-Za-z0-9_.-]+")


class PushFailed(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Pushed:
    groups: int
    series: int
    bytes: int
    seconds: float
    """Pushing only (the rendering in this process is not counted)."""


def exposition(app: AppFleet, batches: int, selection: Selection = FULL) -> bytes:
    """What the collector serves for ``app`` (catalogue series only, no collector self-metrics)
    under the metric profile ``selection``."""
    state = MetricState(batch_buckets=selection.batch_buckets,
                        phase_buckets=selection.phase_buckets)
    for envelope in app.events(batches):
        state.apply(parse_envelope(envelope_from_dict(envelope)))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state, selection=selection))
    registry.register(StalledGauge(state, StallBoard(), selection.exports(cat.QUERY_STALLED)))
    return generate_latest(registry)


def split(text: bytes) -> dict[GroupKey, list[bytes]]:
    """Lines of each group, every family's HELP/TYPE repeated in each group that has samples of
    it (as a per-group push must carry them; they are identical, so the Pushgateway accepts)."""
    groups: dict[GroupKey, list[bytes]] = {}
    headed: dict[GroupKey, int] = {}
    header: list[bytes] = []
    family = 0
    for line in text.splitlines(keepends=True):
        if line.startswith(b"# HELP "):
            header, family = [line], family + 1
            continue
        if line.startswith(b"#"):
            header.append(line)
            continue
        key = _group_of(line)
        lines = groups.setdefault(key, [])
        if headed.get(key) != family:
            lines.extend(header)
            headed[key] = family
        lines.append(line)
    return groups


def _group_of(line: bytes) -> GroupKey:
    app = _APP.search(line)
    if app is None:
        raise PushFailed(f"series without an app_name label: {line[:200]!r}")
    query = _QUERY.search(line)
    return app.group(1).decode(), query.group(1).decode() if query else None


def group_path(key: GroupKey) -> str:
    app, query = key
    for value in (app, query or ""):
        if value and not _SAFE.fullmatch(value):
            raise PushFailed(f"grouping label value {value!r} would need URL encoding")
    return f"/metrics/job/{app}" + (f"/query_id/{query}" if query else "")


def push_groups(client: httpx.Client, url: str, groups: dict[GroupKey, list[bytes]]) -> Pushed:
    """PUT each group (replacing it); the Pushgateway checks each push's consistency with
    everything it holds before answering."""
    series = size = 0
    start = time.perf_counter()
    for key, lines in groups.items():
        body = b"".join(lines)
        response = client.put(url + group_path(key), content=body,
                              headers={"Content-Type": "text/plain; version=0.0.4"})
        if response.status_code not in (200, 202):
            raise PushFailed(f"Pushgateway refused {group_path(key)}: {response.status_code} "
                             f"{response.text[:500]}")
        series += sum(1 for line in lines if not line.startswith(b"#"))
        size += len(body)
    return Pushed(len(groups), series, size, time.perf_counter() - start)


def push_fleet(
    url: str, apps: Sequence[AppFleet], batches: int, selection: Selection = FULL
) -> Pushed:
    """Render and push app by app, so a large fleet is never in this process's memory whole."""
    parts = []
    with httpx.Client(timeout=600) as client:
        for app in apps:
            parts.append(push_groups(client, url, split(exposition(app, batches, selection))))
    return _total(parts)


def _total(parts: Iterable[Pushed]) -> Pushed:
    items = list(parts)
    return Pushed(sum(p.groups for p in items), sum(p.series for p in items),
                  sum(p.bytes for p in items), sum(p.seconds for p in items))
