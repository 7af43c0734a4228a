"""100,000 queries from one token, on a real collector process and a real PostgreSQL history:
the tenant's max_queries quota (1,000 by default) bounds what it costs. The collector's RSS and
the size of /metrics stay within the bound documented in docs/security.md ("Quotas"), and another
tenant is still served."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import UNMEASURED
from tests.tenants_support import (
    A_APP,
    A_TOKEN,
    B_TOKEN,
    SCRAPE_TOKEN,
    accepted_all,
    event_of,
    fresh,
    tenant_collector,
)
from tests.test_collector_support import Collector, run_events

pytestmark = [pytest.mark.postgres, UNMEASURED]

QUERIES = 100_000
PER_REQUEST = 5_000
RSS_BOUND = 256 << 20
METRICS_BOUND = 64 << 20
DEFAULT_MAX_QUERIES = 1000


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with tenant_collector(pg_admin_url, tmp_path_factory.mktemp("flood")) as c:
        yield c


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def flood_bodies() -> Iterator[bytes]:
    """Request bodies of PER_REQUEST progress events, each of a new query (and run): the
    template encoded once, the ids replaced as text (building 100,000 dicts would be slower
    than the collector)."""
    app = {**A_APP, "name": "flood", "id": "APP-ID"}
    template = json.dumps(event_of("progress", app, "QUERY-ID", "RUN-ID"))
    for start in range(0, QUERIES, PER_REQUEST):
        # Ten apps, round robin: the tenant's max_queries binds before max_queries_per_app.
        events = (template.replace("QUERY-ID", str(uuid.uuid4()))
                  .replace("RUN-ID", str(uuid.uuid4())).replace("APP-ID", f"app-flood-{i % 10}")
                  for i in range(start, start + PER_REQUEST))
        yield ('{"events":[' + ",".join(events) + "]}").encode()


def post(c: Collector, body: bytes) -> dict[str, Any]:
    """POST, waiting out 429 + Retry-After (the events-per-second quota) as a push sink does."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {A_TOKEN}"}
    while True:
        response = httpx.post(c.ingest_url, content=body, headers=headers, timeout=120)
        if response.status_code == 429 and "Retry-After" in response.headers:
            time.sleep(float(response.headers["Retry-After"]))  # the server's own pacing
            continue
        assert response.status_code in (200, 429), response.text[:500]
        return dict(response.json())


def test_100000_queries_from_one_token_stay_within_the_documented_bound(
        collector: Collector) -> None:
    assert collector.proc is not None
    baseline = rss_bytes(collector.proc.pid)
    accepted = refused = 0
    for body in flood_bodies():
        outcome = post(collector, body)
        accepted += outcome["accepted"]
        refused += sum(1 for r in outcome["rejected"] if "(max_queries)" in r["error"])
    assert accepted == DEFAULT_MAX_QUERIES
    assert refused == QUERIES - DEFAULT_MAX_QUERIES
    metrics = httpx.get(collector.url + "/metrics", timeout=120,
                        headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    rss = rss_bytes(collector.proc.pid)
    size = len(metrics.content)
    series = sum(1 for line in metrics.text.splitlines() if line and line[0] != "#")
    print(f"\nflood: RSS {baseline / 2**20:.0f} -> {rss / 2**20:.0f} MiB, /metrics "
          f"{size / 2**20:.1f} MiB, {series} series")
    assert rss < RSS_BOUND, f"RSS {rss / 2**20:.0f} MiB"
    assert size < METRICS_BOUND, f"/metrics {size / 2**20:.1f} MiB"
    # The tenant at its quota leaves the others served.
    ids = fresh()
    accepted_all(collector, run_events(**ids), B_TOKEN)
