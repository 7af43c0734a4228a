"""The listener's plan reader without Spark: it degrades to the progress's names, says so once,
reads each run once, and never blocks the intake."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from sparkwatch.listener.plan_reader import PlanReader
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo, EventKind, QueryProgress
from sparkwatch.plan.model import QueryPlan, Source
from tests.test_history_support import event, load_sample

APP = AppInfo(name="orders-etl", id="app-20261121093000-0001", spark_version="4.3.0")


def progress(query_id: str, run_id: str, batch_id: int = 1) -> Any:
    raw = load_sample("window_agg")
    raw.update(id=query_id, runId=run_id, batchId=batch_id)
    return event(EventKind.PROGRESS, raw)


class GoneQueries:
    """A JVM session whose queries have all stopped (streams().get(id) is null)."""

    def streams(self) -> Any:
        return self

    def get(self, query_id: str) -> None:
        return None


def collect(reader_jspark: Any, events: list[Any], unavailable: str | None = None) -> list[Any]:
    plans: list[QueryPlan] = []
    reader = PlanReader(reader_jspark, [("test", plans.append)], unavailable, retry_seconds=0.01)
    for parsed in events:
        reader(parsed)
    assert reader.flush(10)
    reader.stop(5)
    return plans


def test_connect_degrades_to_progress_names_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events = [progress("q1", "r1"), progress("q1", "r1", 2), progress("q2", "r2")]
    with caplog.at_level(logging.DEBUG, logger="sparkwatch.listener.plan_reader"):
        plans = collect(None, events, unavailable="Spark Connect")
    assert [(p.query_id, p.source) for p in plans] == [
        ("q1", Source.PROGRESS),
        ("q2", Source.PROGRESS),
    ]  # one read per run, not per batch
    assert plans[0].note == "plan not read: Spark Connect"
    assert [(op.operator, op.kind) for op in plans[0].operators] == [
        ("stateStoreSave", "aggregation")
    ]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Spark Connect" in warnings[0].getMessage()


def test_a_query_gone_before_its_plan_was_read_degrades() -> None:
    [plan] = collect(GoneQueries(), [progress("q1", "r1")])
    assert plan.source is Source.PROGRESS
    assert plan.note == "plan not read: the query is no longer active"


def test_a_plan_applies_to_its_own_run_only() -> None:
    state = MetricState()
    first, second = progress("q1", "r1"), progress("q1", "r2")
    state.apply(first)
    [old] = collect(None, [first])
    state.apply_plan(APP, old)
    query = state.query(APP.id, "q1")
    assert query is not None and query.plan is old
    state.apply(second)  # restart: the old run's plan no longer describes the operators
    [new] = collect(None, [second])
    state.apply_plan(APP, old)  # a late plan of the previous run is ignored
    assert query.plan is old and query.plan_source() is Source.PROGRESS
    state.apply_plan(APP, new)
    assert query.plan is new
    assert isinstance(second.event, QueryProgress)
    assert query.identity(second.event.state_operators[0]).kind == "aggregation"


def test_demo_table_shows_what_the_operator_is_once_its_plan_was_read() -> None:
    from sparkwatch.demo.table import render
    from tests.doctor_support import events_of, plan_of, recorded

    data = recorded("late_data")
    events = events_of(data)
    state = MetricState()
    state.apply_all(events)
    identity = "aggregation on [window, key], append, watermark ts 2s, 2 stores, hdfs"
    with state.read() as (apps, queries):
        assert identity not in render(apps, queries, 160)
    state.apply_plan(AppInfo(**data["app"]), plan_of(data, events))
    with state.read() as (apps, queries):
        lines = render(apps, queries, 160).splitlines()
    at = next(i for i, line in enumerate(lines) if "#0 stateStoreSave" in line)
    assert lines[at + 1].strip() == identity
