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
