"""The bound on request bytes decoded at once (``--max-inflight-body-bytes``) on a real collector:
a request that finds the bound taken waits, then gets 503 with Retry-After, and is accepted once
the request holding the room is done; a bound below the body limit is refused at startup."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.collector.config import load_collector_settings
from sparkwatch.settings import SettingsError
from tests.support import wait_for
from tests.test_collector_support import TOKEN, Collector, fresh_ids, run_events, samples

BOUND = 100_000


def body_of(runs: int) -> bytes:
    events: list[dict[str, Any]] = []
    for _ in range(runs):
        events += run_events(**fresh_ids())
    return json.dumps({"events": events}).encode()


def inflight(collector: Collector) -> float:
    [(_, value)] = samples(collector.metrics(), "sparkwatch_collector_ingest_inflight_bytes")
    return value


def test_a_request_past_the_inflight_bound_gets_503_until_the_room_is_free(
    tmp_path: Path,
) -> None:
    collector = Collector(f"sqlite:///{tmp_path / 'history.db'}", tmp_path / "spool",
                          "--max-body-bytes", str(BOUND),
                          "--max-inflight-body-bytes", str(BOUND))
    first, second = body_of(6), body_of(6)
    assert len(first) + len(second) > BOUND and len(first) < BOUND
    collector.start()
    try:
        # A slow client: headers and a few bytes sent; its declared size is reserved.
        slow = socket.create_connection(("127.0.0.1", collector.port), timeout=30)
        slow.sendall(
            f"POST /api/v1/events HTTP/1.1\r\nHost: collector\r\nAuthorization: Bearer {TOKEN}"
            f"\r\nContent-Type: application/json\r\nContent-Length: {len(first)}\r\n\r\n"
            .encode() + first[:10])
        wait_for(lambda: inflight(collector) == len(first), 10, "the slow request's bytes held")

        refused = collector.post(json.loads(second)["events"])
        assert refused.status_code == 503
        assert refused.headers["Retry-After"].isdigit()
        assert "max_inflight_body_bytes (100000)" in refused.json()["detail"]

        slow.sendall(first[10:])
        answer = slow.recv(65536).decode()
        slow.close()
        assert answer.startswith("HTTP/1.1 200"), answer
        wait_for(lambda: inflight(collector) == 0, 10, "the room given back")
        accepted = collector.post(json.loads(second)["events"])
        assert accepted.status_code == 200, accepted.text
    finally:
        collector.stop()


def test_an_inflight_bound_below_the_body_limit_is_refused_at_startup() -> None:
    env = {"SPARKWATCH_COLLECTOR_NO_AUTH": "true"}
    with pytest.raises(SettingsError, match="--max-inflight-body-bytes .* smaller than"):
        load_collector_settings(env, {"max_body_bytes": "2000", "max_inflight_body_bytes": "1000"})
    settings = load_collector_settings(env, {"max_body_bytes": "2000"})
    assert settings.max_inflight_body_bytes is None  # twice the body limit, see inflight_bound


def _slow_request(collector: Collector, token: str, declared: int) -> socket.socket:
    """Headers declaring ``declared`` bytes and the first few of them, then nothing."""
    slow = socket.create_connection(("127.0.0.1", collector.port), timeout=30)
    slow.sendall(
        f"POST /api/v1/events HTTP/1.1\r\nHost: collector\r\nAuthorization: Bearer {token}"
        f"\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{{"
        .encode())
    return slow


def test_one_tenants_slow_requests_leave_another_tenant_room(tmp_path: Path) -> None:
    """Tenant A opens two requests declaring the body limit and sends nothing more: it holds its
    half of the bound, and its third request is the one refused, naming its share; tenant B's push
    is accepted at once. Before, A's two held all of it and B got 503 for as long as they lasted."""
    tokens = "alpha/*=alpha-ingest-token,beta/*=beta-ingest-token"
    collector = Collector(f"sqlite:///{tmp_path / 'history.db'}", tmp_path / "spool",
                          "--max-body-bytes", str(BOUND),
                          "--max-inflight-body-bytes", str(2 * BOUND),
                          env={"SPARKWATCH_COLLECTOR_TOKENS": tokens})
    collector.start()
    held = []
    try:
        held = [_slow_request(collector, "alpha-ingest-token", BOUND) for _ in range(2)]
        wait_for(lambda: inflight(collector) == BOUND, 10, "A's first request's bytes held")
        accepted = collector.post(run_events(**fresh_ids())[:3], token="beta-ingest-token")
        assert accepted.status_code == 200 and accepted.json()["accepted"] == 3, accepted.text
        refused = collector.post(run_events(**fresh_ids())[:3], token="alpha-ingest-token")
        assert refused.status_code == 503, refused.text
        assert f"exceed its share of max_inflight_body_bytes ({BOUND} of {2 * BOUND}" \
            in refused.json()["detail"]
    finally:
        for sock in held:
            sock.close()
        collector.stop()
