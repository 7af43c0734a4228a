"""The push sink against hostile peers, with real sockets (a stdlib HTTP server per test): what a
server answers must never end the sender thread, make it spin, count lost events as delivered,
write the server's text into the driver's log as many lines, or send a URL's password anywhere.
Each test states what the old code did."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from bench.local import QuietHandler
from sparkwatch.listener.push_sink import DETAIL_CHARS, NOT_A_COLLECTOR, Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from tests.support import wait_for
from tests.test_collector_support import TOKEN
from tests.test_push_hostile import http_server, offer_one

SECRET = "hunter2-in-the-url"
COUNTED_ONE = b'{"accepted": 1, "duplicates": 0, "rejected": []}'
"""The collector's answer to a batch of one event it accepted."""
LIMITED = json.dumps({"detail": "app 'a' already has 3 queries, the limit (max_queries_per_app)",
                      "request_id": "6f1c", "accepted": 0, "duplicates": 0,
                      "rejected": [{"index": 0, "reason": "limit", "error": "over"}]}).encode()
"""The collector's 429 of its cardinality limit: an error naming it, and the batch's count."""


@contextmanager
def sending(url: str, counters: ListenerCounters, backoff: tuple[float, float] = (0.05, 0.1),
            ) -> Iterator[PushSink]:
    """A sink pushing to ``url``, stopped however the test ends (a sender left running would log
    into the next test's capture)."""
    push = PushSink(Endpoint(url, TOKEN, 1.0), counters, capacity=10, batch_size=5,
                    flush_seconds=0.01, backoff=backoff)
    try:
        yield push
    finally:
        push.stop(1)


def failures(counters: ListenerCounters) -> int:
    return counters.delivery_failures.get("push", 0)


def test_retry_after_zero_does_not_make_a_hot_loop_of_posts_and_log_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The old sink waited exactly what the server said: "Retry-After: 0", answered at once, made
    # hundreds of POSTs a second and a warning every 20th of them.
    counters, seen = ListenerCounters(), []

    def come_back_now(handler: QuietHandler) -> None:
        handler.answer(503, b"{}", headers={"Retry-After": "0"})

    with caplog.at_level(logging.WARNING), http_server(come_back_now, seen) as url:
        push = PushSink(Endpoint(url, TOKEN, 1.0), counters, capacity=10, batch_size=5,
                        flush_seconds=0.01, backoff=(0.3, 1.0))
        try:
            hot_loop_checks(push, counters, seen)
        finally:
            push.stop(1)
    assert "push" not in counters.delivered
    ours = [r for r in caplog.records if r.name == "sparkwatch.listener.push_sink"
            and url in r.getMessage()]
    assert len(ours) == 1, [r.getMessage() for r in ours]


def hot_loop_checks(push: PushSink, counters: ListenerCounters, seen: list[str]) -> None:
    """Each offer returns at once; attempts are spaced; a stop returns within its bound."""
    started = time.perf_counter()
    offer_one(push)
    assert time.perf_counter() - started < 0.02  # the offer never blocks
    wait_for(lambda: failures(counters) >= 1, 10, "the first failed attempt")
    first = time.monotonic()
    wait_for(lambda: failures(counters) >= 4, 10, "three more attempts")
    # Three waits of at least the backoff's first (0.3 s) between them.
    assert time.monotonic() - first >= 0.85, f"{len(seen)} POSTs"
    stopping = time.monotonic()
    push.stop(1)
    assert time.monotonic() - stopping < 1.5


@pytest.mark.parametrize("value", ["\xb2", "9" * 400, "Mon, 01 Jan 0001 00:00:00 +2359"],
                         ids=["superscript-two", "400-digits", "a-date-of-year-1"])
def test_a_garbage_retry_after_never_ends_the_sender_thread(value: str) -> None:
    # "\xb2" (a superscript two: str.isdigit says yes, float says no) raised a ValueError out of
    # the sender thread: the push was dead for the rest of the driver's life.
    counters = ListenerCounters()

    def odd(handler: QuietHandler) -> None:
        handler.answer(503, b"{}", headers={"Retry-After": value})

    with http_server(odd) as url, sending(url, counters) as push:
        offer_one(push)
        wait_for(lambda: failures(counters) >= 2 or push.worker.health().state != "ok", 20,
                 "two failed attempts")
        assert push.worker.health().state == "ok"
        assert failures(counters) >= 2


def test_a_429_without_retry_after_is_refused_never_counted_as_delivered() -> None:
    # The old sink counted a 429 (the collector's cardinality limit) as delivered, minus what its
    # reply listed as refused: a server answering 429 with "{}" had every event "delivered".
    # (A 429 that is not the collector's is retried: tests/test_push_foreign_answers.py.)
    counters = ListenerCounters()

    def too_many(handler: QuietHandler) -> None:
        handler.answer(429, LIMITED)

    with http_server(too_many) as url, sending(url, counters) as push:
        offer_one(push)
        wait_for(lambda: counters.dropped.get("push_refused", 0) >= 1, 10, "the refusal")
    assert "push" not in counters.delivered
    assert counters.dropped == {"push_refused": 1}


@pytest.mark.parametrize("value", ["-5", "soon", "1.5"])
def test_a_429_with_an_unreadable_retry_after_is_retried_not_delivered(value: str) -> None:
    counters = ListenerCounters()

    def too_many(handler: QuietHandler) -> None:
        handler.answer(429, b"{}", headers={"Retry-After": value})

    with http_server(too_many) as url, sending(url, counters) as push:
        offer_one(push)
        wait_for(lambda: failures(counters) >= 2 or "push" in counters.delivered, 10,
                 "two failed attempts")
    assert "push" not in counters.delivered


def test_an_answer_nested_deeper_than_json_reads_never_ends_the_sender_thread() -> None:
    # json.loads of "[" * 100000 (100 KB, under the reply limit) raises RecursionError, not a
    # ValueError: it ended the sender thread.
    counters = ListenerCounters()

    def deep(handler: QuietHandler) -> None:
        handler.answer(500, b"[" * 100_000)

    with http_server(deep) as url, sending(url, counters) as push:
        offer_one(push)
        wait_for(lambda: failures(counters) >= 2 or push.worker.health().state != "ok", 20,
                 "two failed attempts")
        assert push.worker.health().state == "ok"


def test_a_servers_reason_is_one_short_log_line(caplog: pytest.LogCaptureFixture) -> None:
    # The old sink logged the server's "detail" whole: 100 KB, and its line breaks made lines of
    # the server's choosing in the driver's log.
    counters = ListenerCounters()
    detail = "x" * 100_000 + "\n2026-01-01 ERROR sparkwatch: made up by the server"

    def wrong_token(handler: QuietHandler) -> None:
        handler.answer(401, json.dumps({"detail": detail}).encode())

    with (caplog.at_level(logging.WARNING), http_server(wrong_token) as url,
          sending(url, counters) as push):
        offer_one(push)
        wait_for(lambda: failures(counters) >= 3, 20, "three failed attempts")
    ours = [r.getMessage() for r in caplog.records if r.name == "sparkwatch.listener.push_sink"
            and url in r.getMessage()]
    assert len(ours) == 1, "said once for the outage, not per attempt"
    assert "\n" not in ours[0] and "\r" not in ours[0]
    assert len(ours[0]) < DETAIL_CHARS + 200
    assert "HTTP 401" in ours[0]


def test_a_refusal_reason_is_one_short_log_line(caplog: pytest.LogCaptureFixture) -> None:
    counters = ListenerCounters()

    def refuse(handler: QuietHandler) -> None:
        handler.answer(400, b'{"request_id": "7a", "detail": "' + b"y" * 50_000
                       + b'\\r\\nFAKE"}')

    with (caplog.at_level(logging.WARNING), http_server(refuse) as url,
          sending(url, counters) as push):
        offer_one(push)
        wait_for(lambda: counters.dropped.get("push_refused", 0) >= 1, 10, "the refusal")
    [line] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert "\n" not in line and "\r" not in line and len(line) < DETAIL_CHARS + 200


def test_a_password_in_the_push_url_is_never_sent_and_the_push_reaches_the_host(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # urllib took "user:password@127.0.0.1" for the host name: it asked DNS for it (the password
    # sent to the resolver) and never reached the collector ("Name or service not known").
    counters, seen, auth = ListenerCounters(), [], []

    def ok(handler: QuietHandler) -> None:
        auth.append(handler.headers.get("Authorization", ""))
        handler.answer(200, COUNTED_ONE)

    with caplog.at_level(logging.DEBUG), http_server(ok, seen) as url:
        with_password = url.replace("http://", f"http://user:{SECRET}@")
        with sending(with_password, counters) as push:
            offer_one(push)
            wait_for(lambda: counters.delivered.get("push", 0) >= 1, 10, "the delivery")
    assert auth == [f"Bearer {TOKEN}"]
    assert SECRET not in caplog.text
    assert "user:***@" in caplog.text  # said once, masked


def test_a_peer_refusing_every_size_is_counted_per_event_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 413 to everything: the sink splits the batch down to single events (right for a collector's
    # body limit) and refused each; it said each one, a warning per event (500 lines a batch).
    counters, seen = ListenerCounters(), []

    def too_large(handler: QuietHandler) -> None:
        handler.answer(413, b'{"detail": "too large"}')

    with (caplog.at_level(logging.WARNING), http_server(too_large, seen) as url,
          sending(url, counters) as push):
        for _ in range(5):
            offer_one(push)
        assert push.flush(20)
    assert counters.dropped == {"push_refused": 5}
    assert "push" not in counters.delivered
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1, lines
    assert len(seen) <= 2 * 5 - 1  # the halving's bound, never a loop


def test_a_long_outage_of_quick_retries_is_said_once_not_every_20th_attempt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A collector answering "Retry-After: 1" for as long as its spool is full: the old sink said
    # the failure again every 20th attempt, a line every 20 s (here: every few milliseconds).
    counters = ListenerCounters()

    def full(handler: QuietHandler) -> None:
        handler.answer(503, b'{"detail": "spool full"}', headers={"Retry-After": "1"})

    with (caplog.at_level(logging.WARNING), http_server(full) as url,
          sending(url, counters, backoff=(0.005, 0.01)) as push):
        offer_one(push)
        wait_for(lambda: failures(counters) >= 45, 30, "45 failed attempts")
    ours = [r.getMessage() for r in caplog.records if url in r.getMessage()]
    assert len(ours) == 1, ours


@pytest.mark.parametrize("body", [b"OK", b"<html>Sign in</html>", b"{}", b'{"accepted": "1"}',
                                  b'{"accepted": true}', b"[1]", b'{"accepted": 1}',
                                  b'{"accepted": -1, "duplicates": 0, "rejected": []}',
                                  b'{"accepted": 1, "duplicates": 0, "rejected": {}}'])
def test_a_2xx_that_is_not_a_collectors_answer_is_retried_never_counted_delivered(
    body: bytes, caplog: pytest.LogCaptureFixture,
) -> None:
    # The old sink took any 2xx for delivered: a push URL naming a proxy's page or a catch-all
    # service lost every event, counted as delivered and never said.
    counters, seen = ListenerCounters(), []

    def not_a_collector(handler: QuietHandler) -> None:
        handler.answer(200, body)

    with (caplog.at_level(logging.WARNING), http_server(not_a_collector, seen) as url,
          sending(url, counters) as push):
        offer_one(push)
        wait_for(lambda: failures(counters) >= 2, 20, "two failed attempts")
    assert "push" not in counters.delivered
    assert NOT_A_COLLECTOR in caplog.text
    assert len(seen) >= 2  # sent again


def test_a_collectors_2xx_is_delivered() -> None:
    counters = ListenerCounters()

    def collector(handler: QuietHandler) -> None:
        handler.answer(200, COUNTED_ONE)

    with http_server(collector) as url, sending(url, counters) as push:
        offer_one(push)
        wait_for(lambda: counters.delivered.get("push", 0) == 1, 20, "the event delivered")
    assert failures(counters) == 0
