"""The push sink counts a refusal only when the collector says it: a 400/415/422, or a 429
without Retry-After, from something that is not the collector (nginx's HTML "400 The plain HTTP
request was sent to HTTPS port", a proxy's rate-limit page, another service's JSON) is retried
with backoff and said on one line, never counted refused (dropped) nor delivered. The old sink
dropped the batch for good on any such answer: one POST, ``dropped == {"push_refused": 1}``.

Stub servers play the foreign peers; the collector's own answers are taken from a real collector
process (history off), so the shapes the sink recognizes are the ones it really sends."""

from __future__ import annotations

import gzip
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.local import QuietHandler
from sparkwatch.listener.push_sink import DETAIL_CHARS, NOT_A_COLLECTOR
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.answers import is_collector_error, is_ingest_result
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.support import wait_for
from tests.test_collector_support import TOKEN, Collector, fresh_ids, run_events
from tests.test_push_hostile import http_server, offer_one
from tests.test_push_hostile_peers import failures, sending

NGINX_400 = (b"<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title>"
             b"</head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The "
             b"plain HTTP request was sent to HTTPS port</center>\r\n<hr><center>nginx</center>"
             b"\r\n</body>\r\n</html>\r\n")
FOREIGN = [
    (400, NGINX_400, "text/html", "The plain HTTP request was sent to HTTPS port"),
    (400, b"Bad Request", "text/plain", "Bad Request"),
    # A web framework's error: a detail, no request id (FastAPI's own 422 has a list)
    (400, b'{"detail": "Bad Request"}', "application/json", "Bad Request"),
    (422, b'{"detail": [{"loc": ["body"], "msg": "field required"}]}', "application/json",
     "field required"),
    (415, b'{"error": "unsupported media type"}', "application/json", "unsupported media"),
    (415, b"[1]", "application/json", "[1]"),
    # A proxy's rate limit, without Retry-After: not the collector's cardinality limit
    (429, b"<html><body><h1>429 Too Many Requests</h1></body></html>", "text/html",
     "Too Many Requests"),
    (429, b"{}", "application/json", "{}"),
    # The collector's rate limit (an error, no count) whose Retry-After a proxy dropped: nothing
    # was accepted, sent again
    (429, b'{"detail": "over max_events_per_second", "request_id": "ab"}', "application/json",
     "over max_events_per_second"),
]


@pytest.mark.parametrize(("status", "body", "content_type", "words"), FOREIGN,
                         ids=[f"{s}-{i}" for i, (s, *_) in enumerate(FOREIGN)])
def test_a_refusal_that_is_not_the_collectors_is_retried_never_counted_dropped(
    status: int, body: bytes, content_type: str, words: str, caplog: pytest.LogCaptureFixture,
) -> None:
    counters, seen = ListenerCounters(), []

    def foreign(handler: QuietHandler) -> None:
        handler.answer(status, body, content_type)

    with (caplog.at_level(logging.WARNING), http_server(foreign, seen) as url,
          sending(url, counters) as push):
        offer_one(push)
        wait_for(lambda: failures(counters) >= 2 or bool(counters.dropped), 20,
                 "two failed attempts")
        assert counters.dropped == {}, "nothing is dropped for a foreign server's words"
        assert "push" not in counters.delivered
        assert len(seen) >= 2, "sent again"
    ours = [r.getMessage() for r in caplog.records if r.name == "sparkwatch.listener.push_sink"
            and url in r.getMessage()]
    assert len(ours) == 1, ours
    [line] = ours
    assert f"HTTP {status}" in line and NOT_A_COLLECTOR in line and words in line, line
    assert "\n" not in line and "\r" not in line and len(line) < 2 * DETAIL_CHARS + 300


@pytest.mark.parametrize(("status", "body"), [
    (400, b'{"detail": "request body is not valid JSON", "request_id": "3f2a"}'),
    (415, b'{"detail": "Content-Type must be application/json", "request_id": "3f2b"}'),
    (422, b'{"detail": "invalid", "request_id": "3f2c"}'),
    (429, json.dumps({"detail": "over the limit (max_queries_per_app)", "request_id": "3f2d",
                      "accepted": 0, "duplicates": 0,
                      "rejected": [{"index": 0, "reason": "limit", "error": "over"}]}).encode()),
])
def test_the_collectors_own_refusal_is_counted_and_not_sent_again(status: int,
                                                                  body: bytes) -> None:
    counters, seen = ListenerCounters(), []

    def collector(handler: QuietHandler) -> None:
        handler.answer(status, body)

    with http_server(collector, seen) as url, sending(url, counters) as push:
        offer_one(push)
        assert push.flush(20)
    assert counters.dropped == {"push_refused": 1}
    assert failures(counters) == 0 and len(seen) == 1


@pytest.mark.parametrize(("status", "body", "said"), [
    (203, b"<html>a proxy's page</html>", "; it said \"<html>a proxy's page</html>\""),
    (204, b"", ""),  # No Content: no body at all
])
def test_a_2xx_that_is_not_the_collectors_is_said_with_its_own_status(
    caplog: pytest.LogCaptureFixture, status: int, body: bytes, said: str,
) -> None:
    # The old sink said every 2xx it could not read as "HTTP 200": a foreign 204 too; then as
    # "HTTP 2xx", which named no status.
    counters = ListenerCounters()

    def foreign(handler: QuietHandler) -> None:
        if body:
            handler.answer(status, body, "text/html")
        else:
            handler.send_response(status)
            handler.end_headers()

    with (caplog.at_level(logging.WARNING), http_server(foreign) as url,
          sending(url, counters) as push):
        offer_one(push)
        wait_for(lambda: failures(counters) >= 1, 20, "a failed attempt")
    [line] = [r.getMessage() for r in caplog.records if url in r.getMessage()]
    assert line == (f"sparkwatch: push to {url} failed (HTTP {status}: {NOT_A_COLLECTOR}{said}), "
                    "attempt 1, retrying")


# --- the real collector's answers are recognized ---------------------------------------------

MAX_BODY = 50_000


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    spool = tmp_path_factory.mktemp("foreign-answers") / "spool"
    c = Collector("off", Path(spool), "--max-body-bytes", str(MAX_BODY),
                  "--max-queries-per-app", "1").start()
    try:
        yield c
    finally:
        c.stop()


def answer(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - http://
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_every_answer_of_the_real_collector_is_recognized_as_its_own(collector: Collector) -> None:
    url, json_type = collector.ingest_url, "application/json"
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": json_type}
    app = {"name": "only-one-query", "id": "o-1"}
    first, second = (run_events(**fresh_ids(), app=app)[:1] for _ in range(2))
    answers = {
        "200": answer(url, json.dumps({"events": first}).encode(), auth),
        "400 not JSON": answer(url, b"{not json", auth),
        "400 broken gzip": answer(url, b"not gzip", {**auth, "Content-Encoding": "gzip"}),
        "413": answer(url, b" " * (MAX_BODY + 1), auth),
        "413 inflated": answer(url, gzip.compress(b" " * (MAX_BODY * 4)),
                               {**auth, "Content-Encoding": "gzip"}),
        "415": answer(url, b"{}", {**auth, "Content-Type": "text/plain"}),
        "401": answer(url, b'{"events": []}', {"Content-Type": json_type}),
        "429 limit": answer(url, json.dumps({"events": second}).encode(), auth),
    }
    statuses = {name: status for name, (status, _) in answers.items()}
    assert statuses == {name: int(name[:3]) for name in answers}, statuses
    for name, (status, raw) in answers.items():
        body = json.loads(raw)
        if status == 200:
            assert is_ingest_result(body) and body["accepted"] == 1, (name, raw)
        elif status == 429:
            assert is_ingest_result(body) and is_collector_error(body), (name, raw)
        else:
            assert is_collector_error(body) and not is_ingest_result(body), (name, raw)


def test_the_real_collectors_cardinality_limit_is_a_refusal_of_the_sink(
    collector: Collector,
) -> None:
    counters = ListenerCounters()
    app = {"name": "one-query-app", "id": "q-1"}
    mine, over = (run_events(**fresh_ids(), app=app)[:2] for _ in range(2))
    with sending(collector.ingest_url, counters) as sink:
        for event in mine:
            sink(parse_envelope(envelope_from_dict(event)))
        assert sink.flush(20)
        for event in over:
            sink(parse_envelope(envelope_from_dict(event)))
        assert sink.flush(20)
    assert counters.delivered == {"push": len(mine)}
    assert counters.dropped == {"push_refused": len(over)}
    assert failures(counters) == 0
