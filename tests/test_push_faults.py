"""The push sink never wedges, with real sockets: a collector that accepts TCP and never answers,
or answers 503 with Retry-After for a while. Offering an event stays instant throughout, memory
keeps its bound (the oldest dropped and counted), Retry-After is honoured (within the cap), and
once the collector answers every event still held is delivered exactly once."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from itertools import pairwise
from typing import Any

import pytest

from bench.local import QuietHandler
from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.support import wait_for
from tests.test_collector_support import (
    TOKEN,
    Collector,
    database_collector,
    free_port,
    fresh_ids,
    run_events,
    samples,
)

pytestmark = pytest.mark.postgres

CAPACITY = 20
EVENTS = 61
SLOWEST_OFFER = 0.1
"""Far below any wait on the network (the sinks' timeouts and Retry-After are 1 s or more),
above what a busy GIL and a loaded machine add to an offer."""
BASE_TAG = 1_700_000_000


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("push-faults") / "spool") as c:
        yield c


def tagged_events(n: int) -> list[ParsedEvent]:
    """``n`` distinct events; each carries its index in ``received_at`` (its tag on the wire)."""
    wire: list[dict[str, Any]] = []
    while len(wire) < n:
        wire += run_events(**fresh_ids())
    return [parse_envelope(envelope_from_dict({**e, "received_at": BASE_TAG + i}))
            for i, e in enumerate(wire[:n])]


def tags_of(body: bytes) -> list[int]:
    return [int(e["received_at"]) - BASE_TAG for e in json.loads(gzip.decompress(body))["events"]]


class SilentServer:
    """Accepts TCP connections on ``port`` and never answers."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self._sock.settimeout(0.1)
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                self._held.append(self._sock.accept()[0])
            except TimeoutError:
                continue

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        self._sock.close()
        for conn in self._held:
            conn.close()


class Gate:
    """A stdlib HTTP server in front of the collector: 503 + ``Retry-After`` while shut, then
    forwarding each request to the collector and recording the tags of what it accepted."""

    def __init__(self, port: int, target: str, retry_after: str) -> None:
        self.target, self.retry_after = target, retry_after
        self.shut = True
        self.refused_at: list[float] = []
        self.forwarded: list[int] = []
        gate = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if gate.shut:
                    gate.refused_at.append(time.monotonic())
                    self.answer(503, b'{"detail": "busy"}',
                                headers={"Retry-After": gate.retry_after})
                else:
                    self.answer(*gate.forward(body, dict(self.headers)))

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def forward(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
        keep = {k: v for k, v in headers.items()
                if k.lower() in ("content-type", "content-encoding", "authorization")}
        request = urllib.request.Request(self.target, body, keep, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, reply = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, reply = exc.code, exc.read()
        if status == 200:
            self.forwarded += tags_of(body)
        return status, reply

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def push_sink(port: int, counters: ListenerCounters, timeout: float,
              backoff: tuple[float, float]) -> PushSink:
    return PushSink(Endpoint(f"http://127.0.0.1:{port}/api/v1/events", TOKEN, timeout), counters,
                    capacity=CAPACITY, batch_size=5, flush_seconds=0.05, backoff=backoff)


def offer_all(push: PushSink, events: list[ParsedEvent]) -> float:
    """Offer every event; the slowest offer's time."""
    slowest = 0.0
    for event in events:
        started = time.perf_counter()
        push(event)
        slowest = max(slowest, time.perf_counter() - started)
    return slowest


def metric(collector: Collector, name: str) -> float:
    [(_, value)] = samples(collector.metrics(), name)
    return value


def overfill_during_the_fault(push: PushSink, counters: ListenerCounters,
                              events: list[ParsedEvent], attempted: Any) -> None:
    """The first event is in flight (and retried), then far more than memory holds arrive."""
    push(events[0])
    wait_for(attempted, 30, "the first attempt to fail")
    assert offer_all(push, events[1:]) < SLOWEST_OFFER, "offering an event must stay instant"
    assert push.queue_state() == (CAPACITY, CAPACITY)
    assert counters.dropped == {"push": EVENTS - 1 - CAPACITY}, "the oldest dropped, counted"
    assert "push" not in counters.delivered


def kept(n: int = EVENTS) -> list[int]:
    """What survives: the batch in flight (the first event) and the newest CAPACITY."""
    return [0, *range(n - CAPACITY, n)]


def reopen_and_drain(gate: Gate, push: PushSink) -> None:
    gate.shut = False
    assert push.flush(30), "delivery resumes by itself"
    push.stop(5)


def assert_the_kept_events_delivered_once(gate: Gate, counters: ListenerCounters) -> None:
    assert sorted(gate.forwarded) == kept(), "every kept event delivered exactly once"
    assert counters.delivered == {"push": len(kept())}


def test_a_collector_that_accepts_and_never_answers_cannot_wedge_the_sink(
    collector: Collector
) -> None:
    port, counters, events = free_port(), ListenerCounters(), tagged_events(EVENTS)
    silent = SilentServer(port)
    # 1.5 s: the same sink later sends through the gate to a real collector, which fsyncs its
    # spool before it answers; an answer later than the timeout would be a resend, and
    # the kept events forwarded twice.
    push = push_sink(port, counters, timeout=1.5, backoff=(0.05, 0.2))
    accepted = metric(collector, "sparkwatch_collector_events_accepted_total")
    try:
        overfill_during_the_fault(push, counters, events,
                                  lambda: counters.delivery_failures.get("push", 0) >= 1)
        wait_for(lambda: counters.delivery_failures["push"] >= 3, 30, "timeouts retried")
        assert push.worker.health().state == "ok", "a timed-out attempt is not a hung worker"
    finally:
        silent.close()
    gate = Gate(port, collector.ingest_url, retry_after="1")
    try:
        reopen_and_drain(gate, push)
    finally:
        gate.close()
    assert_the_kept_events_delivered_once(gate, counters)
    assert metric(collector, "sparkwatch_collector_events_accepted_total") == \
        accepted + len(kept())


def test_503_with_retry_after_is_waited_out_and_retried_not_dropped(collector: Collector) -> None:
    port, counters, events = free_port(), ListenerCounters(), tagged_events(EVENTS)
    gate = Gate(port, collector.ingest_url, retry_after="1")
    # Without Retry-After the sink would retry within 10-20 ms; the server asks for 1 s.
    push = push_sink(port, counters, timeout=5, backoff=(0.01, 3.0))
    try:
        overfill_during_the_fault(push, counters, events, lambda: len(gate.refused_at) >= 1)
        wait_for(lambda: len(gate.refused_at) >= 3, 30, "two more attempts")
        gaps = [b - a for a, b in pairwise(list(gate.refused_at))]
        assert min(gaps) >= 0.9, f"retried before Retry-After: {gaps}"
        reopen_and_drain(gate, push)
    finally:
        gate.close()
    assert_the_kept_events_delivered_once(gate, counters)
    assert counters.dropped == {"push": EVENTS - len(kept())}


def test_a_retry_after_longer_than_the_cap_waits_only_the_cap(collector: Collector) -> None:
    port, counters = free_port(), ListenerCounters()
    gate = Gate(port, collector.ingest_url, retry_after="3600")
    push = push_sink(port, counters, timeout=5, backoff=(0.01, 0.3))
    try:
        push(tagged_events(1)[0])
        wait_for(lambda: len(gate.refused_at) >= 4, 10, "retries every 0.3 s, not every hour")
        reopen_and_drain(gate, push)
    finally:
        gate.close()
    assert gate.forwarded == [0] and counters.dropped == {}
