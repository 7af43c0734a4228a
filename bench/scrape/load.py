"""Loading the collector through its real ingest API, as listeners' push sinks do: compact JSON
``{"events": [...]}``, gzip level 5, one POST per batch, with the app's bearer token."""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from bench.scrape.fleet import AppFleet, batched

INGEST_PATH = "/api/v1/events"
GZIP_LEVEL = 5  # listener/push_sink.py


class LoadFailed(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Loaded:
    events: int
    requests: int
    seconds: float


def push_fleet(url: str, token: str, apps: Sequence[AppFleet], batches: int,
               batch_size: int) -> Loaded:
    """POST every app's events; each must be accepted (none refused, none a duplicate)."""
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip",
               "Authorization": f"Bearer {token}"}
    events = requests = 0
    start = time.perf_counter()
    with httpx.Client(timeout=120) as client:
        for app in apps:
            for batch in batched(app.events(batches), batch_size):
                body = gzip.compress(
                    json.dumps({"events": batch}, separators=(",", ":")).encode(), GZIP_LEVEL)
                response = client.post(url + INGEST_PATH, content=body, headers=headers)
                _check(response, len(batch))
                events += len(batch)
                requests += 1
    return Loaded(events, requests, time.perf_counter() - start)


def _check(response: httpx.Response, sent: int) -> None:
    if response.status_code != 200:
        raise LoadFailed(f"ingest answered {response.status_code}: {response.text[:500]}")
    result = response.json()
    if result["accepted"] != sent or result["duplicates"] or result["rejected"]:
        raise LoadFailed(f"ingest did not take the batch as new: {str(result)[:500]}")
