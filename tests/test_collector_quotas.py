"""Quotas per tenant, on a real collector process and a real PostgreSQL history: a hostile tenant
exhausting each quota in turn (apps, queries per app, queries, operators, custom metric keys,
label value length, events and bytes per second) while B pushes real events: B is 100 %
accepted and stored; the hostile tenant's refusals name the quota and are counted per tenant in
``sparkwatch_collector_quota_rejections_total``. A push sink over its rate quota waits out the
Retry-After and delivers everything."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.tenants_support import (
    A_APP,
    B_APP,
    B_READ,
    B_TOKEN,
    SCRAPE_TOKEN,
    accepted_all,
    drained,
    event_of,
    fresh,
    tenant_collector,
)
from tests.test_collector_support import Collector, run_events, samples

pytestmark = pytest.mark.postgres

LIMITS = {
    "max_apps": 2, "max_queries_per_app": 2, "max_queries": 3, "max_operators_per_query": 1,
    "max_custom_metric_keys": 7, "max_label_value_chars": 100,
    "max_events_per_second": 40, "max_bytes_per_second": 60_000,
}
BURST_SECONDS = 2.5  # 100 events, 150 kB
QUOTAS = tuple(LIMITS)
RATE_QUOTAS = ("max_events_per_second", "max_bytes_per_second")
PUSHER = "pusher"  # the tenant of the push sink test


def token_of(tenant: str) -> str:
    return f"token-of-{tenant}"


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    flags = [f for name, value in LIMITS.items()
             for f in ("--" + name.replace("_", "-"), str(value))]
    tenants = {t.replace("_", "-"): token_of(t.replace("_", "-")) for t in (*QUOTAS, PUSHER)}
    with tenant_collector(pg_admin_url, tmp_path_factory.mktemp("quotas"), *flags,
                          "--rate-burst-seconds", str(BURST_SECONDS), tokens=tenants) as c:
        yield c


def app(n: int, name: str = "hostile") -> dict[str, str]:
    return {"name": f"{name}-{n}", "id": f"app-{name}-{n}", "spark_version": "4.3.0"}


def started(application: dict[str, str]) -> dict[str, Any]:
    ids = fresh()
    return event_of("started", application, ids["query_id"], ids["run_id"])


def progress_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    ids = fresh()
    event = event_of("progress", A_APP, ids["query_id"], ids["run_id"])
    change(event["payload"])
    return event


def two_operators(payload: dict[str, Any]) -> None:
    second = copy.deepcopy(payload["stateOperators"][0])
    payload["stateOperators"].append(second)


def eight_custom_keys(payload: dict[str, Any]) -> None:
    payload["stateOperators"][0]["customMetrics"]["extraKeyOfTheHostileTenant"] = 1


# Requests of the hostile tenant: enough to reach the quota, then some over it.
OVER: dict[str, Callable[[], list[list[dict[str, Any]]]]] = {
    "max_apps": lambda: [[started(app(n)) for n in range(5)]],
    "max_queries_per_app": lambda: [[started(app(0)) for _ in range(4)]],
    "max_queries": lambda: [[started(app(n // 2)) for n in range(4)]],
    "max_operators_per_query": lambda: [[progress_with(two_operators) for _ in range(3)]],
    "max_custom_metric_keys": lambda: [[progress_with(eight_custom_keys) for _ in range(3)]],
    "max_label_value_chars": lambda: [[started({**A_APP, "name": "n" * 101}) for _ in range(3)]],
    "max_events_per_second": lambda: [[started(A_APP) for _ in range(100)]] * 3,
}
REFUSED = {"max_apps": 3, "max_queries_per_app": 2, "max_queries": 1,
           "max_operators_per_query": 3, "max_custom_metric_keys": 3,
           "max_label_value_chars": 3}


def quota_rejections(c: Collector, tenant: str, quota: str) -> float:
    for labels, value in samples(c.metrics(SCRAPE_TOKEN),
                                 "sparkwatch_collector_quota_rejections_total"):
        if labels == {"tenant": tenant, "quota": quota}:
            return value
    return 0.0


B_QUERY = "b2000000-0000-4000-8000-000000000001"


def b_pushes(c: Collector) -> str:
    """One real run of B's query (restarted: a new run id each time), every event accepted;
    its run id. B stays within every quota: one app, one query."""
    run_id = fresh()["run_id"]
    accepted_all(c, run_events(app=B_APP, query_id=B_QUERY, run_id=run_id), B_TOKEN)
    return run_id


def hostile_post(c: Collector, quota: str, events: list[dict[str, Any]]) -> httpx.Response:
    return c.post(events, token=token_of(quota.replace("_", "-")))


def padded_post(c: Collector, quota: str, size: int) -> httpx.Response:
    """A request of ``size`` bytes (an empty events list and padding)."""
    body = json.dumps({"events": [], "pad": "x" * size}).encode()
    return httpx.post(c.ingest_url, content=body, timeout=30, headers={
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token_of(quota.replace('_', '-'))}"})


@pytest.mark.parametrize("quota", [q for q in QUOTAS if q not in RATE_QUOTAS])
def test_a_tenant_at_a_quota_is_refused_naming_it_and_b_is_fully_served(
        collector: Collector, quota: str) -> None:
    tenant = quota.replace("_", "-")
    b_queries = [b_pushes(collector)]
    refused = []
    for events in OVER[quota]():
        response = hostile_post(collector, quota, events)
        body = response.json()
        refused += [r for r in body["rejected"] if r["reason"] == "limit"]
        b_queries.append(b_pushes(collector))
    assert len(refused) == REFUSED[quota], refused
    assert all(r["error"].endswith(f"({quota})") for r in refused), refused
    assert quota_rejections(collector, tenant, quota) == REFUSED[quota]
    assert quota_rejections(collector, "beta", quota) == 0
    assert_stored(collector, b_queries)


def assert_stored(c: Collector, b_runs: list[str]) -> None:
    """Every run B pushed is in the history, whole (its 6 batches)."""
    drained(c)
    runs = c.get(f"/api/v1/queries/{B_QUERY}/runs", B_READ, limit=1000).json()
    batches = {r["run_id"]: r["batches"] for r in runs}
    assert {run: batches.get(run) for run in b_runs} == {run: 6 for run in b_runs}


def test_over_the_events_rate_is_429_with_retry_after_and_b_is_fully_served(
        collector: Collector) -> None:
    quota = "max_events_per_second"
    b_queries = [b_pushes(collector)]
    answers = []
    for events in OVER[quota]():
        answers.append(hostile_post(collector, quota, events))
        b_queries.append(b_pushes(collector))
    limited = [a for a in answers if a.status_code == 429]
    assert limited and answers[0].status_code == 200
    for answer in limited:
        assert quota in answer.json()["detail"]
        assert 1 <= int(answer.headers["Retry-After"]) <= 3
    assert quota_rejections(collector, quota.replace("_", "-"), quota) == 100 * len(limited)
    assert_stored(collector, b_queries)


def test_over_the_bytes_rate_is_429_with_retry_after_and_b_is_fully_served(
        collector: Collector) -> None:
    quota = "max_bytes_per_second"
    b_queries = [b_pushes(collector)]
    first = padded_post(collector, quota, 160_000)  # a full bucket lets one large request by
    assert first.status_code != 429, first.text
    # 140 kB: refused unless 2.3 s of refill passed since the first (20 kB refilled in 0.33 s,
    # less than two traced processes may take between the two requests)
    second = padded_post(collector, quota, 140_000)
    b_queries.append(b_pushes(collector))
    assert second.status_code == 429, second.text
    assert quota in second.json()["detail"]
    assert 1 <= int(second.headers["Retry-After"]) <= 3
    assert quota_rejections(collector, quota.replace("_", "-"), quota) == 1
    assert_stored(collector, b_queries)


def test_a_push_sink_over_its_rate_waits_out_retry_after_and_drops_nothing(
        collector: Collector) -> None:
    wire: list[dict[str, Any]] = []
    while len(wire) < 240:  # 2.4 bursts of the events quota: some batches get 429
        wire += run_events(app=app(0, PUSHER), query_id=B_QUERY.replace("b2", "c2"),
                           run_id=fresh()["run_id"])
    counters = ListenerCounters()
    sink = PushSink(Endpoint(collector.ingest_url, token_of(PUSHER), 10), counters,
                    capacity=1000, batch_size=60, flush_seconds=0.05, backoff=(0.05, 5.0))
    try:
        for event in wire:
            sink(parse_envelope(envelope_from_dict(event)))
        assert sink.flush(60), "the sink delivers everything within its bound"
    finally:
        sink.stop(5)
    assert counters.delivered == {"push": len(wire)}
    assert not counters.dropped.get("push")
    assert counters.delivery_failures.get("push", 0) > 0, "some batches were answered 429"
    assert quota_rejections(collector, PUSHER, "max_events_per_second") > 0, \
        "the rate quota was reached (429 + Retry-After), and waited out"
