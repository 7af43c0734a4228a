"""The driver side never raises into the app: a failing plan sink and a failing history rollup
are caught, logged and counted in listener_errors_total{where}, and the work goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkwatch.history.writer import HistoryWriter
from sparkwatch.listener.history_sink import HistorySink
from sparkwatch.listener.plan_reader import PlanReader
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import QueryProgress
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from sparkwatch.plan.model import QueryPlan
from tests.support import wait_for
from tests.test_collector_support import count_rows, fresh_ids, run_events


def _parsed_run() -> list:  # type: ignore[type-arg]
    return [parse_envelope(envelope_from_dict(e)) for e in run_events(**fresh_ids())]


def test_a_plan_sink_that_fails_is_counted_and_the_others_still_get_the_plan() -> None:
    counters, taken = ListenerCounters(), []

    def broken(plan: QueryPlan) -> None:
        raise RuntimeError("the sink is broken")

    reader = PlanReader(None, [("broken", broken), ("good", taken.append)])
    reader.on_error = lambda: counters.count_error("plans")
    try:
        for event in _parsed_run():
            reader(event)
        wait_for(lambda: len(taken) >= 1, 10, "the good sink got the plan")
    finally:
        reader.stop(2.0)
    assert counters.errors == {"plans": len(taken)}


def test_a_failing_history_rollup_is_counted_and_writes_go_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counters = ListenerCounters()

    def rollup() -> bool:
        raise RuntimeError("the rollup failed")

    url = f"sqlite:///{tmp_path / 'history.db'}"
    writer = HistoryWriter(url)
    sink = HistorySink(writer, counters, capacity=100, batch_size=10, flush_seconds=0.01,
                       maintenance=rollup, maintenance_seconds=0.01)
    try:
        events = _parsed_run()
        for event in events:
            sink(event)
        assert sink.flush(30)
        wait_for(lambda: counters.errors.get("history_maintenance", 0) >= 1, 10,
                 "the failed rollup counted")
    finally:
        sink.stop(5.0)
    progress = [e for e in events if isinstance(e.event, QueryProgress)]
    assert progress and count_rows(url, "select count(*) from batches") == len(progress)
    assert "history maintenance failed (will retry): the rollup failed" in caplog.text
