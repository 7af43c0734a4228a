"""``sparkwatch demo --collector`` with another HTTP service on the port: the demo's collector
exits (the port is taken) and the demo says so, with the collector's reason. The old start took
any HTTP 200 to its empty ingest for the collector being up, and went on pushing to the other
service while its collector had exited with status 3."""

from __future__ import annotations

import http.server
from urllib.parse import urlsplit

import pytest

from bench.local import QuietHandler, served
from sparkwatch.collector.local import LocalCollectorError, _ours, local_collector

INGEST_RESULT = b'{"accepted": 0, "duplicates": 0, "rejected": []}'


def answering(status: int, body: bytes, echo: bool) -> type[http.server.BaseHTTPRequestHandler]:
    """A service answering every request with ``status`` and ``body``; with ``echo``, it also
    sends the request's X-Request-Id back, as many proxies do."""

    class Handler(QuietHandler):
        def reply(self) -> None:
            if length := int(self.headers.get("Content-Length") or 0):
                self.rfile.read(length)
            echoed = self.headers.get("X-Request-Id")
            self.answer(status, body, headers={"X-Request-Id": echoed} if echo and echoed
                        else None)

        do_GET = do_POST = reply  # noqa: N815 - the stdlib's names

    return Handler


@pytest.mark.parametrize(("status", "body", "echo"), [
    (200, b"OK", False),
    (200, b'{"status": "ok"}', True),  # a /healthz of another kind
    (200, INGEST_RESULT, False),  # a collector's shape, but not our request's answer
    (200, b'{"accepted": 0, "rejected": []}', False),
    (204, b"", True),
    (401, b'{"detail": "no token"}', True),  # another sparkwatch collector: not our token
], ids=["text", "json-echoing", "collector-shape", "collector-shape-2", "204", "401"])
def test_another_service_on_the_port_is_reported_as_the_port_being_taken(
    status: int, body: bytes, echo: bool,
) -> None:
    with served(answering(status, body, echo)) as url:
        port = urlsplit(url).port
        assert port is not None
        with pytest.raises(LocalCollectorError) as raised, local_collector(None, port):
            pytest.fail("the demo went on with another service on its collector's port")
    message = str(raised.value)
    assert message.startswith("the collector exited: "), message
    assert "address already in use" in message.lower(), message
    assert f"another service answers at http://127.0.0.1:{port}" in message, message


@pytest.mark.parametrize(("body", "ours"), [
    (INGEST_RESULT, True),
    (b'{"accepted": 0, "rejected": []}', False),  # no count of duplicates: no IngestResult
    (b'{"accepted": 0, "duplicates": -1, "rejected": []}', False),
    (b'{"accepted": false, "duplicates": 0, "rejected": []}', False),
    (b'{"accepted": 1, "duplicates": 0, "rejected": []}', False),  # not the empty batch's
    (b'{"accepted": 0, "duplicates": 0, "rejected": [{"index": 0}]}', False),
    (b"[]", False),
])
def test_an_echoed_answer_is_ours_only_as_the_collector_s_count_of_the_empty_batch(
    body: bytes, ours: bool,
) -> None:
    # The demo's check repeated the sink's shape check of the collector's answer, short of it:
    # an answer without a count of duplicates, echoing our request id, was taken for ours.
    assert _ours(200, "r1", body, "r1") is ours
    assert _ours(200, "r2", body, "r1") is False
    assert _ours(201, "r1", body, "r1") is False
