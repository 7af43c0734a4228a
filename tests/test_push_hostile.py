"""The push sink against servers that are not collectors, with real sockets: one dripping its
answer a byte at a time, one answering more than any collector would, one redirecting the POST,
one not speaking HTTP. Each is a failed attempt, retried; none is taken for a delivery, none
holds the sender past its timeout, none fills the driver's memory."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from bench.local import QuietHandler, served
from sparkwatch.listener.push_sink import REPLY_LIMIT, Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.slow_server import dripping_server
from tests.support import wait_for
from tests.test_collector_support import TOKEN, fresh_ids, run_events

TIMEOUT = 1.0


def push_to(url: str, counters: ListenerCounters, timeout: float = TIMEOUT) -> PushSink:
    return PushSink(Endpoint(url, TOKEN, timeout), counters, capacity=10, batch_size=5,
                    flush_seconds=0.01, backoff=(0.05, 0.1))


def offer_one(push: PushSink) -> None:
    push(parse_envelope(envelope_from_dict(run_events(**fresh_ids())[0])))


@contextmanager
def http_server(on_post: Callable[[QuietHandler], None],
                seen: list[str] | None = None) -> Iterator[str]:
    """A stdlib HTTP server on a free port answering every POST with ``on_post`` and every GET
    with 200 ``{}``; the methods and paths it was asked for go to ``seen``."""
    log = seen if seen is not None else []

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            log.append(f"POST {self.path}")
            self.rfile.read(int(self.headers["Content-Length"]))
            on_post(self)

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            log.append(f"GET {self.path}")
            self.answer(200, b"{}")

    with served(Handler) as url:
        yield f"{url}/api/v1/events"


def failures_without_delivery(push: PushSink, counters: ListenerCounters, n: int) -> None:
    offer_one(push)
    wait_for(lambda: counters.delivery_failures.get("push", 0) >= n, 20,
             f"{n} failed attempts")
    assert "push" not in counters.delivered, "nothing is taken for delivered"
    assert push.worker.health().state == "ok"


def test_a_collector_dripping_its_answer_is_cut_off_at_the_timeout_and_retried() -> None:
    counters = ListenerCounters()
    # A byte every 50 ms never lets a per-read timeout expire: only an overall one ends it.
    with dripping_server(every=0.05) as port:
        push = push_to(f"http://127.0.0.1:{port}/api/v1/events", counters)
        started = time.monotonic()
        failures_without_delivery(push, counters, 2)
        # Two attempts of at most TIMEOUT each, the backoff's waits, and a loaded machine's slack.
        assert time.monotonic() - started < 2 * TIMEOUT + 5
        push.stop(1)


def test_an_answer_longer_than_any_collector_s_is_not_read_and_not_a_delivery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counters = ListenerCounters()

    def flood(handler: QuietHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(REPLY_LIMIT * 4))
        handler.end_headers()
        with suppress(OSError):  # the sink hangs up once past its limit
            handler.wfile.write(b" " * (REPLY_LIMIT * 4))

    with caplog.at_level(logging.WARNING), http_server(flood) as url:
        # Time enough to read past the limit on a loaded machine: only the first failure is
        # logged, and one cut off by the deadline would not name the limit.
        push = push_to(url, counters, timeout=30)
        failures_without_delivery(push, counters, 1)
        push.stop(1)
    assert f"answered with more than {REPLY_LIMIT} bytes" in caplog.text


def test_a_redirected_post_is_a_failed_attempt_not_a_delivery_to_the_page_it_names(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counters, seen = ListenerCounters(), []

    def moved(handler: QuietHandler) -> None:
        handler.answer(302, b"", headers={"Location": "/elsewhere"})

    with caplog.at_level(logging.WARNING), http_server(moved, seen) as url:
        push = push_to(url, counters)
        failures_without_delivery(push, counters, 2)
        push.stop(1)
    # urllib's own handler would GET /elsewhere (the events dropped) and count them delivered.
    assert "GET /elsewhere" not in seen
    assert "HTTP 302" in caplog.text


def test_a_server_that_does_not_speak_http_is_a_failed_attempt_and_the_sink_keeps_going() -> None:
    counters = ListenerCounters()
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def babble() -> None:
        while not stop.is_set():
            with suppress(OSError):
                conn, _ = listener.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    threading.Thread(target=babble, daemon=True).start()
    try:
        push = push_to(f"http://127.0.0.1:{listener.getsockname()[1]}/", counters)
        failures_without_delivery(push, counters, 2)
        push.stop(1)
    finally:
        stop.set()
        listener.close()
