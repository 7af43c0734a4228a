"""The listener's push sink against a real collector process: batches are delivered and counted,
a collector that is down costs the caller nothing (bounded memory, drops counted, retries with
backoff), the disk spool keeps everything in order across an outage and a driver restart, and
events the collector refuses are counted, not retried forever."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.listener.push_sink import Endpoint, PushSink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from sparkwatch.spool import Spool
from tests.support import wait_for
from tests.test_collector_support import (
    APP_TOKEN,
    TOKEN,
    Collector,
    count_rows,
    fresh_ids,
    module_database,
    run_events,
    samples,
)
from tests.tmpfs import Filler, small_filesystem

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def history(pg_admin_url: str) -> Iterator[str]:
    with module_database(pg_admin_url) as url:
        yield url


@pytest.fixture
def collector(history: str, tmp_path: Path) -> Iterator[Collector]:
    c = Collector(history, tmp_path / "collector-spool")
    yield c
    c.stop()


def parsed_run(n_runs: int = 1) -> tuple[list[ParsedEvent], list[str]]:
    events, run_ids = [], []
    for _ in range(n_runs):
        ids = fresh_ids()
        run_ids.append(ids["run_id"])
        events += [parse_envelope(envelope_from_dict(e)) for e in run_events(**ids)]
    return events, run_ids


def sink(collector: Collector, counters: ListenerCounters, token: str = TOKEN,
         spool: Spool | None = None, capacity: int = 1000, **kwargs: Any) -> PushSink:
    return PushSink(Endpoint(collector.ingest_url, token, timeout=5), counters, capacity=capacity,
                    batch_size=kwargs.pop("batch_size", 4), flush_seconds=0.05, spool=spool,
                    backoff=kwargs.pop("backoff", (0.05, 0.5)), **kwargs)


def send_all(push: PushSink, events: list[ParsedEvent]) -> None:
    """Push every event, wait until the collector has answered them all, stop the sink."""
    for e in events:
        push(e)
    assert push.flush(30)
    push.stop(5)


def history_batches(url: str, run_ids: list[str]) -> int:
    return count_rows(url, "select count(*) from batches where run_id = any(:r)", r=run_ids)


def accepted(collector: Collector) -> float:
    [(_, value)] = samples(collector.metrics(), "sparkwatch_collector_events_accepted_total")
    return value


def test_events_are_delivered_in_batches_and_counted(collector: Collector) -> None:
    collector.start()
    counters = ListenerCounters()
    push = sink(collector, counters)
    events, run_ids = parsed_run(2)
    send_all(push, events)
    assert counters.delivered == {"push": len(events)}
    assert counters.dropped == {} and counters.delivery_failures == {}
    assert accepted(collector) == len(events)
    progress = sum(1 for e in events if e.kind == "progress")
    wait_for(lambda: history_batches(collector.history_url, run_ids) == progress, 30, "history")


def test_a_collector_that_is_down_costs_the_caller_nothing(collector: Collector) -> None:
    counters = ListenerCounters()
    push = sink(collector, counters, capacity=5)
    events, _ = parsed_run(3)
    slowest = 0.0
    for e in events:  # nobody listens on the port: every POST fails
        started = time.perf_counter()
        push(e)
        slowest = max(slowest, time.perf_counter() - started)
    assert slowest < 0.05, f"offering an event took {slowest * 1000:.1f} ms"
    wait_for(lambda: counters.delivery_failures.get("push", 0) >= 3, 30, "retries")
    size, capacity = push.queue_state()
    assert capacity == 5 and size <= 5
    assert counters.dropped["push"] >= len(events) - 5 - 4, "beyond memory: dropped, counted"
    collector.start()
    assert push.flush(30), "what was kept is delivered once the collector is up"
    push.stop(5)
    kept = counters.delivered["push"]
    assert kept + counters.dropped["push"] == len(events)
    assert accepted(collector) == kept


def test_the_disk_spool_keeps_everything_across_an_outage_and_a_restart(
    collector: Collector, tmp_path: Path
) -> None:
    counters = ListenerCounters()
    events, run_ids = parsed_run(3)
    first, second = events[: len(events) // 2], events[len(events) // 2:]
    push = sink(collector, counters, spool=Spool(tmp_path / "push", 1 << 20, fsync=False),
                capacity=8)
    for e in first:  # memory holds only 8: each waits for the sender to move some to the spool
        wait_for(lambda: push.queue_state()[0] < 8, 10, "room in memory")
        push(e)
    wait_for(lambda: push.queue_state()[0] == 0, 30, "memory spilled to the spool")
    push.stop(1)  # the driver stops while the collector is down
    assert counters.dropped == {}, "nothing dropped: it is all in the spool"
    assert "push" not in counters.delivered

    collector.start()
    restarted = sink(collector, counters, spool=Spool(tmp_path / "push", 1 << 20, fsync=False))
    send_all(restarted, second)
    assert counters.delivered["push"] == len(events) and counters.dropped == {}
    progress = sum(1 for e in events if e.kind == "progress")
    wait_for(lambda: history_batches(collector.history_url, run_ids) == progress, 30, "history")


def test_refused_events_are_counted_and_not_retried(collector: Collector) -> None:
    collector.start()
    counters = ListenerCounters()
    push = sink(collector, counters, token=APP_TOKEN)  # pushes only "orders-etl"
    events, _ = parsed_run(1)
    foreign = parse_envelope(envelope_from_dict({**run_events(**fresh_ids())[0],
                                                 "app": {"name": "billing", "id": "b-1"}}))
    send_all(push, [*events, foreign])
    assert counters.delivered["push"] == len(events)
    assert counters.dropped == {"push_refused": 1}
    assert counters.delivery_failures == {}


def test_a_wrong_token_is_retried_until_the_collector_accepts_it(collector: Collector) -> None:
    collector.start()
    counters = ListenerCounters()
    push = sink(collector, counters, token="rotated-token")
    events, _ = parsed_run(1)
    for e in events:
        push(e)
    wait_for(lambda: counters.delivery_failures.get("push", 0) >= 2, 30, "401s retried")
    assert not push.flush(0.2)
    collector.stop()  # the operator adds the token to the collector
    collector.env["SPARKWATCH_COLLECTOR_TOKENS"] += ",*=rotated-token"
    collector.start()
    assert push.flush(30)
    push.stop(5)
    assert counters.delivered["push"] == len(events) and counters.dropped == {}


def test_a_full_spool_disk_drops_and_counts_and_the_sink_keeps_going(
    collector: Collector, tmp_path: Path
) -> None:
    counters = ListenerCounters()
    events, run_ids = parsed_run(6)
    first, second = events[: len(events) // 2], events[len(events) // 2:]
    with small_filesystem(tmp_path / "disk", "2m") as disk:
        filler = Filler(disk / "filler")
        spool = Spool(disk / "push", 1 << 20, fsync=False)
        push = sink(collector, counters, spool=spool, capacity=8)
        filler.fill()  # the collector is down and the spool's disk is full
        for e in first:
            push(e)
        wait_for(lambda: counters.dropped.get("push_spool", 0) > 0, 30, "spill drops counted")
        wait_for(lambda: push.queue_state()[0] == 0, 30, "memory emptied all the same")
        assert spool.write_failures > 0 and spool.is_empty()

        filler.free()
        for e in second:  # memory holds only 8: each waits for room, made by the spool
            wait_for(lambda: push.queue_state()[0] < 8, 10, "room in memory")
            push(e)
        wait_for(lambda: not spool.is_empty(), 30, "the spool takes events again")
        collector.start()
        assert push.flush(30)
        push.stop(5)
    dropped = counters.dropped.get("push_spool", 0) + counters.dropped.get("push", 0)
    assert counters.delivered["push"] + dropped == len(events)
    assert counters.delivered["push"] >= len(second) and accepted(collector) == \
        counters.delivered["push"]
