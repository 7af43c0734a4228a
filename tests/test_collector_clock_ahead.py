"""A real collector: a run whose last accepted event was stamped 23 h ahead (ingest takes up to a
day) is marked stalled once silent, as a run stamped right is. Before, its run showed "running"
with tomorrow's last event, and neither the stall nor the lost-runs job looked at it until the
wall clock passed that time (writer-level: tests/test_history_clock_ahead.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support import wait_for
from tests.test_collector_jobs import progress_at
from tests.test_collector_support import (
    Collector,
    envelope,
    fresh_ids,
    running,
    samples,
)
from tests.test_history_support import fetch

STALL_FLAGS = ("--stall-check-seconds", "1", "--stall-min-seconds", "3", "--stall-intervals", "2")


def test_a_run_whose_last_event_was_stamped_ahead_is_marked_stalled_when_silent(
    sqlite_url: str, tmp_path: Path,
) -> None:
    collector = Collector(sqlite_url, tmp_path / "spool", *STALL_FLAGS)
    steady, skewed = fresh_ids(), fresh_ids()
    now = datetime.now(UTC)
    times = [now - timedelta(seconds=10 - i) for i in range(10)]
    ahead = now + timedelta(hours=23)
    events = [envelope("progress", p) for p in [*progress_at(times, **steady),
                                                 *progress_at([*times[:-1], ahead], **skewed)]]

    def stalled() -> set[str]:
        return {labels["query_id"] for labels, value in
                samples(collector.metrics(), "spark_streaming_query_stalled") if value == 1}

    with running(collector):
        assert collector.post(events).json()["accepted"] == len(events)
        wait_for(lambda: {steady["query_id"], skewed["query_id"]} <= stalled(), 30,
                 "both silent runs marked stalled")
        [run] = collector.get(f"/api/v1/queries/{skewed['query_id']}/runs").json()
        assert run["status"] == "running"
        assert datetime.fromisoformat(run["last_event_at"]) <= datetime.now(UTC)
    last_batch = fetch(sqlite_url, "batches", skewed["run_id"])[-1]
    assert last_batch["timestamp"] == ahead.replace(microsecond=ahead.microsecond // 1000 * 1000)
