"""The collector's HTTP API on a real server process and a real PostgreSQL history: per-event
validation, auth, limits (each refusal a 4xx naming the problem), dedupe, /metrics, the read API."""

from __future__ import annotations

import gzip
import json
import random
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support import wait_for
from tests.test_collector_support import (
    APP,
    APP_TOKEN,
    READ_TOKEN,
    TOKEN,
    Collector,
    count_rows,
    database_collector,
    envelope,
    fresh_ids,
    recorded,
    run_events,
    samples,
)

pytestmark = pytest.mark.postgres

MAX_BODY = 300_000
MAX_EVENTS = 40
MAX_QUERIES = 3
# Over 64 KiB of gzip (inflated in pieces) whose trailer claims 3 bytes: the memory reserved for
# a request is what its trailer says, so inflating more is refused.
# mtime=0: the same bytes at every collection (test ids hold them; pytest-xdist compares them)
LYING_GZIP = gzip.compress(json.dumps(
    {"events": [], "pad": random.Random(1).randbytes(100_000).hex()}).encode(), mtime=0)[:-4] \
    + (3).to_bytes(4, "little")


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("api") / "spool",
                            "--max-body-bytes", str(MAX_BODY),
                            "--max-events-per-request", str(MAX_EVENTS),
                            "--max-queries-per-app", str(MAX_QUERIES),
                            env={"SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN}) as c:
        yield c


def app_named(name: str) -> dict[str, str]:
    return {"name": name, "id": f"app-{name}-{uuid.uuid4().hex[:8]}", "spark_version": "4.3.0"}


def fresh_run(app: str = "orders-etl", **kwargs: Any) -> list[dict[str, Any]]:
    """A recorded run under new ids in a new app instance (each app has MAX_QUERIES slots)."""
    return run_events(**fresh_ids(), app=app_named(app), **kwargs)


def rows(collector: Collector, sql: str, **params: Any) -> int:
    return count_rows(collector.history_url, sql, **params)


def test_valid_events_are_accepted_and_each_invalid_one_is_named(collector: Collector) -> None:
    good = fresh_run()
    bad = [
        envelope("progress", {"id": "q", "runId": "r", "timestamp": "yesterday"}),
        {"kind": "progress", "app": APP, "payload": {}},
        envelope("progress", {**recorded()["progress"][1], "batchId": "seven"}),
        "not an event",
    ]
    events = good[:3] + bad + good[3:]
    response = collector.post(events, gzipped=True)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["accepted"] == len(good)
    errors = {r["index"]: (r["reason"], r["error"]) for r in body["rejected"]}
    assert sorted(errors) == [3, 4, 5, 6]
    assert errors[3] == ("invalid", "progress.timestamp: not an ISO-8601 timestamp: 'yesterday'")
    assert "event.received_at" in errors[4][1]
    assert "progress.batchId" in errors[5][1]
    assert errors[6] == ("invalid", "event: expected a JSON object, got str")


def test_accepted_batches_reach_the_history_once_and_metrics_do_not_double_count(
    collector: Collector,
) -> None:
    events = fresh_run()
    ids = {"query_id": events[0]["payload"]["id"], "run_id": events[0]["payload"]["runId"]}
    progress = [e for e in events if e["kind"] == "progress"]
    assert collector.post(events).json()["duplicates"] == 0
    again = collector.post(events).json()  # a retried delivery
    assert (again["accepted"], again["duplicates"]) == (len(events), len(progress))
    wait_for(lambda: rows(collector, "select count(*) from batches where run_id = :r",
                          r=ids["run_id"]) == len(progress), 30, "batches in the history")
    operators = sum(len(p["payload"]["stateOperators"]) for p in progress)
    assert rows(collector, "select count(*) from operator_batches where run_id = :r",
                r=ids["run_id"]) == operators
    text = collector.metrics(READ_TOKEN)
    [(labels, batches)] = [s for s in samples(text, "spark_streaming_query_batches_total")
                           if s[0]["query_id"] == ids["query_id"]]
    assert batches == len(progress)
    assert (labels["app_name"], labels["app_id"]) == (events[0]["app"]["name"],
                                                      events[0]["app"]["id"])
    [(_, failures)] = [s for s in samples(text, "spark_streaming_query_failures_total")
                       if s[0]["query_id"] == ids["query_id"]]
    assert failures == 0


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing bearer token"),
        ({"Authorization": "Bearer wrong"}, "invalid ingest token"),
        ({"Authorization": f"Basic {TOKEN}"}, "expected 'Bearer <token>'"),
    ],
)
def test_ingest_without_a_valid_token_is_401(
    collector: Collector, headers: dict[str, str], message: str
) -> None:
    response = httpx.post(collector.ingest_url, json={"events": run_events()}, headers=headers)
    assert response.status_code == 401
    assert message in response.json()["detail"]
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert TOKEN not in collector.log_text(), "a token reached the log"


@pytest.mark.parametrize("path", ["/api/v1/events", "/api/v1/queries", "/metrics", "/"])
def test_a_request_with_two_authorization_headers_is_refused_whichever_comes_first(
    collector: Collector, path: str,
) -> None:
    """The first one was read (a good token then a wrong one was served as the good one's
    holder), where a proxy in front might check the last: the two disagreed about who called."""
    for first, second in [(READ_TOKEN, "wrong"), ("wrong", READ_TOKEN), (TOKEN, TOKEN)]:
        headers = [("Authorization", f"Bearer {first}"), ("Authorization", f"Bearer {second}")]
        method = "POST" if path == "/api/v1/events" else "GET"
        response = httpx.request(method, collector.url + path, headers=headers,
                                 json={"events": run_events()} if method == "POST" else None)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["detail"] == "more than one Authorization header: send one"
        assert response.json()["request_id"] == response.headers["x-request-id"]
        assert response.headers["cache-control"] == "no-store"
    assert READ_TOKEN not in collector.log_text() and TOKEN not in collector.log_text()

def test_an_app_token_pushes_only_for_its_app(collector: Collector) -> None:
    mine = fresh_run(terminated=False)[:2]
    theirs = fresh_run("billing", terminated=False)[:2]
    body = collector.post(mine + theirs, token=APP_TOKEN).json()
    assert body["accepted"] == 2
    assert [(r["index"], r["reason"]) for r in body["rejected"]] == [
        (2, "forbidden_app"), (3, "forbidden_app")]
    assert "'billing' is not the app this token pushes for" in body["rejected"][0]["error"]


def test_an_event_from_more_than_a_day_ahead_is_refused_naming_its_time(
        collector: Collector) -> None:
    """A run's latest event time only grows: one from 2300 kept its run "running" for good."""
    import time

    run = fresh_run(terminated=True)
    started, progress, ended = run[0], run[1], run[-1]
    future = {**progress, "payload": {**progress["payload"], "timestamp": "2300-01-01T00:00:00Z"}}
    late_end = {**ended, "received_at": 10_413_792_000.0}  # 2300-01-01
    soon = {**run[2], "payload": {**run[2]["payload"], "timestamp": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))}}  # an hour's skew is taken
    body = collector.post([started, future, late_end, soon]).json()
    assert body["accepted"] == 2
    errors = {r["index"]: r["error"] for r in body["rejected"]}
    assert errors[1].startswith("progress.timestamp: 2300-01-01T00:00:00Z is more than a day "
                                "ahead of the collector's clock (")
    assert errors[2].startswith("event.received_at: 2300-01-01T00:00:00Z is more than a day")
    assert {r["reason"] for r in body["rejected"]} == {"invalid"}


def test_an_event_from_before_any_spark_streaming_query_is_refused_naming_its_time(
        collector: Collector) -> None:
    """A clock never set, or a made-up time: a run stored as ended in 1970, years before it
    started."""
    run = fresh_run(terminated=True)
    started, progress, ended = run[0], run[1], run[-1]
    old = {**progress, "payload": {**progress["payload"], "timestamp": "2015-12-31T23:59:59Z"}}
    body = collector.post([started, old, {**ended, "received_at": 0}]).json()
    assert body["accepted"] == 1
    assert {r["index"]: r["error"] for r in body["rejected"]} == {
        1: "progress.timestamp: 2015-12-31T23:59:59Z is before 2016-01-01T00:00:00Z, before any "
           "Spark streaming query: is the driver's clock right?",
        2: "event.received_at: 1970-01-01T00:00:00Z is before 2016-01-01T00:00:00Z, before any "
           "Spark streaming query: is the driver's clock right?",
    }


def test_an_oversized_body_is_413_before_and_after_gzip(collector: Collector) -> None:
    big = [envelope("idle", {"id": "q", "runId": "r", "timestamp": "2026-11-21T10:00:00.000Z",
                             "pad": "x" * MAX_BODY})]
    response = collector.post(big)
    assert response.status_code == 413
    assert f"request body is larger than the limit of {MAX_BODY} bytes" in response.text
    bomb = collector.post(big, gzipped=True)  # ~1 KB on the wire, 300 KB inflated
    assert bomb.status_code == 413
    assert "decompressed request body is larger than the limit" in bomb.text


def test_too_many_events_in_one_request_is_413(collector: Collector) -> None:
    events = run_events(terminated=False)[:1] * (MAX_EVENTS + 1)
    response = collector.post(events)
    assert response.status_code == 413
    assert f"{MAX_EVENTS + 1} events in one request, over the limit of {MAX_EVENTS}" in \
        response.text


def test_too_many_queries_for_one_app_is_429_naming_the_limit(collector: Collector) -> None:
    app = app_named("chatty")
    for _ in range(MAX_QUERIES):
        assert collector.post(run_events(**fresh_ids(), app=app)[:2]).json()["accepted"] == 2
    response = collector.post(run_events(**fresh_ids(), app=app)[:2])
    assert response.status_code == 429
    detail = response.json()["detail"]
    assert f"already has {MAX_QUERIES} queries, the limit (max_queries_per_app)" in detail
    assert {r["reason"] for r in response.json()["rejected"]} == {"limit"}
    text = collector.metrics(READ_TOKEN)
    [(_, refused)] = [s for s in samples(text, "sparkwatch_collector_events_rejected_total")
                      if s[0]["reason"] == "limit"]
    assert refused >= 2


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"{not json", {}, 400, "request body is not valid JSON"),
        (b"[]", {}, 400, 'must be a JSON object {"events": [...]}'),
        (b'{"events": {}}', {}, 400, '"events" must be a JSON array'),
        (b"\x1f\x8b\x08garbage", {"Content-Encoding": "gzip"}, 400, "not valid gzip"),
        (LYING_GZIP, {"Content-Encoding": "gzip"}, 400,
         "past the size its last four bytes declare (3 bytes): a gzip trailer that is wrong, or "
         "bytes after the gzip stream; send the body as one gzip member"),
        (gzip.compress(b'{"events": []}', mtime=0) + bytes(8), {"Content-Encoding": "gzip"}, 400,
         "(0 bytes): a gzip trailer that is wrong, or bytes after the gzip stream"),
        (gzip.compress(b'{"events": []}' * 50, mtime=0)[:30], {"Content-Encoding": "gzip"}, 400,
         "truncated gzip"),
        (gzip.compress(b'{"events": []}', mtime=0) + b"garbage!", {"Content-Encoding": "gzip"},
         400, "but 8 bytes follow the gzip stream: send the body as one gzip member"),
        (gzip.compress(b'{"events": []}', mtime=0) * 2, {"Content-Encoding": "gzip"}, 400,
         "bytes follow the gzip stream"),
        (b"{}", {"Content-Encoding": "br"}, 415, "unsupported Content-Encoding 'br'"),
        (b'{"events": []}', {"Content-Type": "text/plain"}, 415,
         "Content-Type must be application/json (got text/plain)"),
        (b'{"events": []}', {"Content-Type": ""}, 415, "Content-Type must be application/json"),
    ],
)
def test_malformed_requests_are_refused_naming_the_problem(
    collector: Collector, body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    response = httpx.post(collector.ingest_url, content=body, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json", **headers})
    assert response.status_code == status
    assert message in response.json()["detail"]
    assert response.json()["request_id"] == response.headers["x-request-id"]


def test_reads_and_metrics_need_the_read_token_when_one_is_set(collector: Collector) -> None:
    assert collector.get("/metrics").status_code == 401
    assert collector.get("/api/v1/queries", "wrong").status_code == 401
    assert collector.get("/api/v1/queries", READ_TOKEN).status_code == 200
    assert collector.get("/healthz").json() == {"status": "ok"}


def test_read_api_pages_through_state_and_progress(collector: Collector) -> None:
    events = fresh_run()
    ids = {"query_id": events[0]["payload"]["id"], "run_id": events[0]["payload"]["runId"]}
    assert collector.post(events).json()["accepted"] == len(events)
    progress = [e["payload"] for e in events if e["kind"] == "progress"]
    wait_for(lambda: rows(collector, "select count(*) from batches where run_id = :r",
                          r=ids["run_id"]) == len(progress), 30, "batches in the history")
    qid = ids["query_id"]
    first = collector.get(f"/api/v1/queries/{qid}/state", READ_TOKEN, operator=0,
                          since="2000-01-01T00:00:00Z", limit=4).json()
    rest = collector.get(f"/api/v1/queries/{qid}/state", READ_TOKEN, operator=0,
                         since="2000-01-01T00:00:00Z", limit=4, offset=4).json()
    assert [p["batch_id"] for p in first + rest] == [p["batchId"] for p in progress]
    assert [p["num_rows_total"] for p in first + rest] == [
        p["stateOperators"][0]["numRowsTotal"] for p in progress]
    newest = collector.get(f"/api/v1/queries/{qid}/progress", READ_TOKEN, limit=2).json()
    assert [p["batch_id"] for p in newest] == [p["batchId"] for p in progress[-2:]]
    runs = collector.get(f"/api/v1/queries/{qid}/runs", READ_TOKEN).json()
    assert [(r["run_id"], r["status"], r["batches"]) for r in runs] == [
        (ids["run_id"], "terminated", len(progress))]
    queries = collector.get("/api/v1/queries", READ_TOKEN, limit=1000).json()
    assert qid in {q["query_id"] for q in queries}
    missing = collector.get("/api/v1/queries/no-such-query/state", READ_TOKEN)
    assert missing.status_code == 404
    # where the history lives is the operator's business, not a reader's
    assert missing.json()["detail"] == "no query with id or name 'no-such-query'"
    bad_operator = collector.get(f"/api/v1/queries/{qid}/state", READ_TOKEN, operator=9)
    assert bad_operator.status_code == 404 and "no state operator 9" in bad_operator.text
    for part, param, value in (("state", "since", "0001-01-01T00:00:00+14:00"),
                               ("progress", "until", "9999-12-31T23:59:59-14:00"),
                               ("rollups", "since", "9999-12-31T23:59:59-14:00")):
        # past the calendar once in UTC: was a 500 (OverflowError)
        out = collector.get(f"/api/v1/queries/{qid}/{part}", READ_TOKEN, **{param: value})
        assert out.status_code == 422, (part, out.text)
        [problem] = out.json()["detail"]
        assert problem["loc"] == ["query", param] and "out of range" in problem["msg"]


def test_readyz_reports_the_history_and_spool(collector: Collector) -> None:
    ready = collector.get("/readyz").json()
    assert ready["status"] == "ready"
    assert ready["history"] == {"enabled": True, "ok": True, "error": None}
    assert ready["spool"]["max_bytes"] > 0


def test_gzip_and_plain_bodies_are_equivalent(collector: Collector) -> None:
    events = fresh_run(terminated=False)[:2]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    plain = httpx.post(collector.ingest_url, content=json.dumps({"events": events}),
                       headers=headers)
    zipped = httpx.post(collector.ingest_url,
                        content=gzip.compress(json.dumps({"events": events}).encode()),
                        headers={**headers, "Content-Encoding": "gzip"})
    assert plain.json()["accepted"] == zipped.json()["accepted"] == 2
    assert zipped.json()["duplicates"] == 1


def test_a_body_with_nan_literals_is_accepted_and_reaches_the_history(
    collector: Collector,
) -> None:
    # Python's json module writes NaN literals (the strict fast decoder refuses them): such a
    # body takes the standard library's path instead of being rejected.
    events = fresh_run()
    progress = next(e for e in events if e["kind"] == "progress")
    progress["payload"] = {**progress["payload"], "inputRowsPerSecond": float("nan")}
    answer = collector.post(events)
    assert answer.status_code == 200 and answer.json()["rejected"] == []
    run_id = progress["payload"]["runId"]
    wait_for(lambda: rows(collector, "select count(*) from batches where run_id = :r "
                          "and input_rows_per_second is null", r=run_id) == 1,
             30, "the NaN-rate batch in the history")


def test_every_get_answers_head_with_its_status_and_headers_and_no_body(
        collector: Collector) -> None:
    """Load balancers and uptime checks probe with HEAD: /healthz, /readyz, /metrics and the read
    API answered 405."""
    run = fresh_run()
    assert collector.post(run).status_code == 200
    query = run[0]["payload"]["id"]
    read = {"Authorization": f"Bearer {READ_TOKEN}"}
    for path, headers in [("/healthz", {}), ("/readyz", {}), ("/metrics", read),
                          ("/api/v1/queries", read), (f"/api/v1/queries/{query}/runs", read),
                          ("/openapi.json", {})]:
        get = httpx.get(collector.url + path, headers=headers, timeout=30)
        head = httpx.head(collector.url + path, headers=headers, timeout=30)
        assert (head.status_code, head.content) == (get.status_code, b""), path
        assert head.headers["content-type"] == get.headers["content-type"], path
    # HEAD goes through the GET's auth, and a route without GET answers GET's 405.
    assert httpx.head(collector.url + "/api/v1/queries", timeout=30).status_code == 401
    assert httpx.head(collector.ingest_url, timeout=30).status_code == 405
