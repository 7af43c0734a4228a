"""The demo stops each query while it waits for its next trigger: a stop that lands while Spark
plans a batch can end the run as failed (Spark 4.x, an interrupt wrapped in an
InvocationTargetException), which the demo would then show for a query the user only stopped."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.demo import queries as dq
from sparkwatch.demo.stopping import (
    IDLE_SECONDS,
    MARGIN_SECONDS,
    TriggerWait,
    stop_all,
    until_next_trigger,
)
from sparkwatch.demo.waiting import wait_until
from tests.support import SettableClock
from tests.workloads import installed_spark_version


@dataclass
class ScriptedQuery:
    """A query whose trigger activity follows a script, one value per status read."""

    script: list[bool]
    isActive: bool = True  # noqa: N815 - StreamingQuery's own attribute name
    reads: int = 0
    name: str = "q"

    def stop(self) -> None:
        self.isActive = False

    @property
    def status(self) -> dict[str, Any]:
        active = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return {"isTriggerActive": active}


def test_the_next_trigger_is_the_next_multiple_of_the_interval_since_the_epoch() -> None:
    assert until_next_trigger(1_000_000.0, 3.0) == pytest.approx(2.0)
    assert until_next_trigger(999_998.5, 3.0) == pytest.approx(0.5)
    assert until_next_trigger(1_000_001.9, 1.0) == pytest.approx(0.1)
    assert until_next_trigger(999_999.0, 3.0) == pytest.approx(3.0)  # a trigger starts now


def test_a_query_seen_idle_once_is_not_yet_waiting_for_its_trigger() -> None:
    """The instant between two back-to-back batches of a query that overran its interval."""
    clock = SettableClock(999_999.0 + 0.5)  # 2.5 s before the next trigger
    wait = TriggerWait(ScriptedQuery([False, True, False]), 3.0, clock)
    assert not wait()  # idle, but only just
    clock.now += 0.05
    assert not wait()  # the next batch runs: the idle time starts again
    clock.now += IDLE_SECONDS
    assert not wait()


def test_a_query_idle_over_consecutive_reads_with_time_to_spare_is_stopped() -> None:
    clock = SettableClock(999_999.0 + 0.5)
    wait = TriggerWait(ScriptedQuery([False]), 3.0, clock)
    assert not wait()
    clock.now += IDLE_SECONDS + 0.01
    assert wait()


def test_a_query_idle_too_close_to_its_next_trigger_is_not_stopped() -> None:
    """stop() would reach the JVM as the next batch starts planning."""
    clock = SettableClock(1_000_002.0 - MARGIN_SECONDS - IDLE_SECONDS + 0.05)
    wait = TriggerWait(ScriptedQuery([False]), 3.0, clock)
    assert not wait()
    clock.now += IDLE_SECONDS + 0.01
    assert until_next_trigger(clock.now, 3.0) < MARGIN_SECONDS
    assert not wait()


def test_a_query_that_already_ended_needs_no_wait() -> None:
    assert TriggerWait(ScriptedQuery([True], isActive=False), 3.0)()


def test_a_query_a_stop_may_interrupt_is_stopped_at_once_in_its_batch() -> None:
    """Its batches run back to back (the demo's first minute): a wait for a gap would last the
    whole timeout."""
    busy = ScriptedQuery([True], name="window_agg")
    started = time.monotonic()
    assert stop_all([busy], 3.0, timeout=30, interruptible=frozenset({"window_agg"})) == []
    assert not busy.isActive and busy.reads == 0
    assert time.monotonic() - started < 5


def test_only_stream_stream_joins_wait_for_a_gap_between_batches() -> None:
    waiting = {q.name for q in dq.QUERIES} - dq.interruptible(list(dq.QUERIES))
    assert waiting == {"stream_stream_join", "skewed_keys"}


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_every_query_but_the_joins_stopped_in_its_first_batch_terminates_cleanly(
        spark: Any, tmp_path: Path) -> None:
    """What lets the demo stop them at once: Spark takes the interrupt of their batch for the
    stop, even of the first one, where Python workers and state stores start (the demo's first
    minute, when Ctrl-C waited longest)."""
    cfg = dq.DemoConfig(checkpoint_dir=tmp_path, rows_per_second=5, trigger_seconds=1.0)
    chosen = [q for q in dq.available(installed_spark_version())
              if q.name in dq.interruptible(list(dq.QUERIES))]
    ended: dict[str, Any] = {}
    for demo_query in chosen:
        query = dq.start(spark, demo_query, cfg)
        try:
            assert wait_until(lambda q=query: q.status["isTriggerActive"], 120, 0.01)
            in_first_batch = query.lastProgress is None
            query.stop()
        finally:
            stop_all([query], cfg.trigger_seconds)
        assert in_first_batch, f"{query.name} ended its first batch before the stop"
        ended[query.name] = query.exception()
    assert ended == {q.name: None for q in chosen}


@pytest.mark.spark
def test_batches_start_on_multiples_of_the_trigger_interval(spark: Any, tmp_path: Path) -> None:
    """The premise, on real Spark: a batch that did not overrun starts on the next multiple of
    the interval since the epoch (ProcessingTimeExecutor.nextBatchTime)."""
    cfg = dq.DemoConfig(checkpoint_dir=tmp_path, rows_per_second=5, trigger_seconds=2.0)
    query = dq.start(spark, next(q for q in dq.QUERIES if q.name == "global_limit"), cfg)
    try:
        # The first batch starts at once; one that overran its interval (two busy cores) starts
        # at once too: the premise holds once a batch that did not overrun follows.
        def offsets() -> list[float]:
            starts = [_epoch(p["timestamp"]) for p in query.recentProgress]
            return [start % cfg.trigger_seconds for start in starts[1:]]

        assert wait_until(lambda: any(offset < 0.2 for offset in offsets()), 120), offsets()
    finally:
        stop_all([query], cfg.trigger_seconds)
    assert query.exception() is None


@pytest.mark.spark
def test_a_stream_stream_join_stopped_between_batches_terminates_cleanly(
        spark: Any, tmp_path: Path) -> None:
    """The demo's trigger: its batches take well under it, so the stop finds its wait."""
    cfg = dq.DemoConfig(checkpoint_dir=tmp_path, rows_per_second=5, trigger_seconds=3.0)
    query = dq.start(spark, next(q for q in dq.QUERIES if q.name == "stream_stream_join"), cfg)
    assert wait_until(lambda: len(query.recentProgress) >= 2, 120), "2 batches"
    assert stop_all([query], cfg.trigger_seconds, timeout=30) == []
    assert not query.isActive
    assert query.exception() is None


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
