"""The push sink against a real HTTP server with a body limit (a proxy's ``client_max_body_size``):
413 for a POST over a number of bytes, the collector's count for any other. The sink learns the
size taken and packs what follows under it, and drops an event that alone is over a size already
refused instead of sending it."""

from __future__ import annotations

import gzip
import json
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from bench.local import QuietHandler, served
from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from tests.test_collector_support import TOKEN

PAD = 1500
"""Random hex characters per event: gzip takes each to about 800 bytes, and two events together
to about twice that (random text does not compress across events)."""
LIMIT = 1200
"""Bytes of body the server takes: one event, never two."""


@dataclass
class Posts:
    """What the server was sent: (body bytes, events, status) per POST."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    seen: list[tuple[int, list[str], int]] = field(default_factory=list)

    def since(self, start: int) -> list[tuple[int, list[str], int]]:
        with self.lock:
            return self.seen[start:]

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


@contextmanager
def limited_server(limit: int = LIMIT, max_events: int | None = None,
                   fail_once: frozenset[str] = frozenset()) -> Iterator[tuple[str, Posts]]:
    """413 for a body over ``limit`` bytes, or (as the collector's max_events_per_request) for
    more than ``max_events`` events; 503 (an outage) the first time an event of ``fail_once``
    comes."""
    posts = Posts()
    failed: set[str] = set()

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            names = [e["name"] for e in json.loads(gzip.decompress(body))["events"]]
            too_many = max_events is not None and len(names) > max_events
            status = 413 if len(body) > limit or too_many else 200
            if status == 200 and (set(names) & fail_once) - failed:
                failed.update(names)
                status = 503
            with posts.lock:
                posts.seen.append((len(body), names, status))
            if status == 413:
                self.answer(413, b"<html><body>413 Request Entity Too Large</body></html>",
                            "text/html")
            elif status == 503:
                self.answer(503, b"<html><body>503 Service Unavailable</body></html>",
                            "text/html")
            else:
                self.answer(200, json.dumps({"accepted": len(names), "duplicates": 0,
                                             "rejected": []}).encode())

    with served(Handler) as url:
        yield f"{url}/api/v1/events", posts


@contextmanager
def sink(url: str, counters: ListenerCounters) -> Iterator[PushSink]:
    # Batches gather for a second: each phase's offers go as one batch of 8.
    push = PushSink(Endpoint(url, TOKEN, 2.0), counters, capacity=100, batch_size=8,
                    flush_seconds=1.0, backoff=(0.05, 0.1))
    try:
        yield push
    finally:
        push.stop(2)


def event(name: str, pad: int = PAD) -> dict[str, str]:
    return {"name": name, "pad": secrets.token_hex(pad // 2)}


def offer(push: PushSink, events: list[dict[str, str]]) -> None:
    for item in events:
        push.offer_wire(item)
    assert push.flush(30)


def refused(posts: list[tuple[int, list[str], int]]) -> list[tuple[int, list[str], int]]:
    return [p for p in posts if p[2] == 413]


def test_a_limit_of_one_event_is_learned_and_the_next_batch_goes_without_a_refusal() -> None:
    # The old sink halved every batch down to single events, each time: 2N-1 POSTs for a batch
    # of N (N-1 of them refused), for every batch, as long as the limit stood.
    counters = ListenerCounters()
    with limited_server() as (url, posts), sink(url, counters) as push:
        offer(push, [event(f"a{i}") for i in range(8)])
        first = posts.since(0)
        offer(push, [event(f"b{i}") for i in range(8)])
        second = posts.since(len(first))
    assert counters.delivered == {"push": 16}
    assert "push_refused" not in counters.dropped
    assert len(first) < 2 * 8 - 1, first
    assert refused(second) == [], second
    assert len(second) == 8, second
    assert sorted(name for _, names, _ in second for name in names) == [f"b{i}" for i in range(8)]


def test_an_event_over_a_size_already_refused_is_dropped_without_a_post(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The old sink sent every event too large alone once more, on its own, to be refused.
    counters = ListenerCounters()
    with (caplog.at_level(logging.WARNING), limited_server() as (url, posts),
          sink(url, counters) as push):
        offer(push, [event("a0"), event("a1"), event("huge-a", 4 * PAD), event("a2")])
        first = posts.since(0)
        offer(push, [event("b0"), event("huge-b", 5 * PAD), event("b1")])
        second = posts.since(len(first))
    assert counters.delivered == {"push": 5}
    assert counters.dropped == {"push_refused": 2}
    assert not any("huge-b" in names for _, names, _ in second), second
    assert refused(second) == [], second
    lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "bytes" in lines[0], lines


def test_an_event_larger_than_a_batch_refused_for_its_count_of_events_is_still_sent() -> None:
    # A 413 to several events may be a limit on their number (the collector's
    # max_events_per_request): only a size refused to one event alone is over any limit.
    counters = ListenerCounters()
    with limited_server(limit=1 << 20, max_events=2) as (url, posts), sink(url, counters) as push:
        offer(push, [event(f"a{i}") for i in range(4)])
        first = posts.since(0)
        offer(push, [event("large", 6 * PAD)])
        second = posts.since(len(first))
    assert refused(first), first  # four at once were refused, as large as they were
    assert first[0][0] < second[0][0], (first, second)
    assert counters.delivered == {"push": 5}
    assert "push_refused" not in counters.dropped
    assert [(names, status) for _, names, status in second] == [(["large"], 200)]


def test_a_split_batch_whose_later_request_fails_sends_again_only_what_was_not_taken() -> None:
    # Sent again whole, the parts already taken were posted and counted delivered twice.
    counters = ListenerCounters()
    with (limited_server(fail_once=frozenset({"c5"})) as (url, posts),
          sink(url, counters) as push):
        offer(push, [event("learn")])
        offer(push, [event("learn2"), event("learn3")])  # the limit learnt: one event a POST
        start = posts.count()
        offer(push, [event(f"c{i}") for i in range(8)])
        sent = posts.since(start)
    taken = [names[0] for _, names, status in sent if status == 200]
    assert sorted(taken) == [f"c{i}" for i in range(8)], sent
    assert [names for _, names, status in sent if status == 503] == [["c5"]], sent
    assert counters.delivered == {"push": 11}
