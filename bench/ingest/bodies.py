"""The collector's request bodies, encoded before timing exactly as the listener's push sink
encodes them (``listener/push_sink.py``: compact JSON ``{"events": [...]}``, gzip level 5).

Client ``c`` of ``K`` owns the queries ``q`` with ``q % K == c`` and sends their events in order,
like one driver's push sink: each query's batches arrive in order, as in production.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

from bench.fleet import Fleet
from bench.ingest.push import Request

INGEST_PATH = "/api/v1/events"
GZIP_LEVEL = 5  # the push sink's


def lane_of(fleet: Fleet, event: int, clients: int) -> int:
    return (event % fleet.queries) % clients


def lane_events(fleet: Fleet, events: int, clients: int) -> list[list[int]]:
    """Event numbers per client, in event order."""
    lanes: list[list[int]] = [[] for _ in range(clients)]
    for i in range(events):
        lanes[lane_of(fleet, i, clients)].append(i)
    return lanes


def encode(envelopes: list[dict[str, Any]]) -> bytes:
    return gzip.compress(json.dumps({"events": envelopes}, separators=(",", ":")).encode(),
                         GZIP_LEVEL)


def chunks(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def collector_lanes(fleet: Fleet, events: int, clients: int, batch: int) -> list[list[Request]]:
    template = fleet.template()
    return [
        [Request(INGEST_PATH, encode([fleet.envelope(template, i) for i in chunk]), len(chunk))
         for chunk in chunks(lane, batch)]
        for lane in lane_events(fleet, events, clients)
    ]
