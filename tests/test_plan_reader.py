"""The listener's plan reader without Spark: it degrades to the progress's names, says so once,
reads each run once, never blocks the intake, throttles its history warnings and stops at once."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from sparkwatch.listener.plan_reader import PlanHistory, PlanReader, make_plan_reader
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo, EventKind, QueryProgress
from sparkwatch.plan.mapping import from_progress
from sparkwatch.plan.model import QueryPlan, Source
from tests.support import wait_for
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



def test_an_expected_plan_waits_for_its_querys_first_event_and_not_for_ever() -> None:
    clock = [1000.0]
    state = MetricState(stale_seconds=600, clock=lambda: clock[0])
    first, other = progress("q1", "r1"), progress("q2", "r2")
    [plan] = collect(None, [first])
    [gone] = collect(None, [other])
    state.expect_plan(APP, plan)
    state.expect_plan(APP, gone)
    assert state.query(APP.id, "q1") is None, "a waiting plan creates no query"
    state.apply(first)
    query = state.query(APP.id, "q1")
    assert query is not None and query.plan is plan
    clock[0] += 600  # q2 stays away as long as a vanished query is kept
    state.evict()
    state.apply(other)
    late = state.query(APP.id, "q2")
    assert late is not None and late.plan is None


def test_an_earlier_read_of_a_runs_plan_does_not_replace_a_later_one() -> None:
    state = MetricState()
    first = progress("q1", "r1")
    state.apply(first)
    [plan] = collect(None, [first])
    earlier = QueryPlan(plan.query_id, plan.run_id, plan.source, plan.operators,
                        read_at=plan.read_at - 60)
    state.apply_plan(APP, plan)
    state.expect_plan(APP, earlier)  # read back from the history after the pushed one arrived
    query = state.query(APP.id, "q1")
    assert query is not None and query.plan is plan


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


class ScalaMap(dict):
    def contains(self, key: str) -> bool:
        return key in self

    def apply(self, key: str) -> str:
        return self[key]


class EndedQuery:
    """A JVM query handle as Py4J shows it; its execution outlives the query."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def runId(self) -> str:  # noqa: N802 - JVM names
        return self.raw["run_id"]

    def streamingQuery(self) -> Any:  # noqa: N802
        return self

    def lastExecution(self) -> Any:  # noqa: N802
        raw = self.raw

        class Execution:
            def currentBatchId(self) -> int:  # noqa: N802
                return raw["batch_id"]

            def executedPlan(self) -> Any:  # noqa: N802
                return type("Plan", (), {"treeString": lambda _: raw["tree"]})()

            def outputMode(self) -> str:  # noqa: N802
                return raw["output_mode"]

            def checkpointLocation(self) -> str:  # noqa: N802
                return raw["state_checkpoint"]

            def offsetSeqMetadata(self) -> Any:  # noqa: N802
                return type("Meta", (), {"conf": lambda _: ScalaMap(raw["conf"])})()

            def sparkSession(self) -> Any:  # noqa: N802
                conf = type("Conf", (), {"get": lambda _, key, default: default})()
                return type("Session", (), {"conf": lambda _: conf})()

        return Execution()


class SessionWhoseQueryEnds:
    """``streams().get(id)`` finds the query only while it runs (here: only the first time)."""

    def __init__(self, query: EndedQuery) -> None:
        self.query: EndedQuery | None = query

    def streams(self) -> Any:
        return self

    def get(self, query_id: str) -> EndedQuery | None:
        query, self.query = self.query, None
        return query


def test_the_handle_taken_at_start_reads_a_query_that_already_ended() -> None:
    import json
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "plans" / "spark-4.3.0" / "global_limit.json"
    raw = json.loads(fixture.read_text())["raw"]
    raw.update(query_id="q1", run_id="r1")
    started = event(EventKind.STARTED, {"id": "q1", "runId": "r1", "name": "limit",
                                        "timestamp": "2026-11-21T10:00:00.000Z"})
    limit = load_sample("limit")
    limit.update(id="q1", runId="r1")
    [plan] = collect(SessionWhoseQueryEnds(EndedQuery(raw)),
                     [started, event(EventKind.PROGRESS, limit)])
    assert plan.source is Source.PLAN, plan.note
    assert (plan.operators[0].kind, plan.operators[0].details) == ("global_limit", {"limit": 25})


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A port that refuses every connection at once (bound, not listening)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def test_a_history_down_is_said_for_the_first_lost_plan_and_every_20th_not_each_run(
    refusing_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    history = PlanHistory(f"postgresql://postgres@127.0.0.1:{refusing_port}/history",
                          migrate=False, backoff=0.001)
    with caplog.at_level(logging.WARNING, logger="sparkwatch.listener.plan_reader"):
        for i in range(25):  # 25 query runs while the history is down
            history(from_progress(f"q{i}", f"r{i}", ["stateStoreSave"], "from progress", 1))
    history.close()
    lost = [r.getMessage() for r in caplog.records if "not written" in r.getMessage()]
    assert len(lost) == 2, lost
    assert lost[0].startswith("sparkwatch: plan of q0 not written (1 in a row): ")
    assert lost[1].startswith("sparkwatch: plan of q19 not written (20 in a row): ")


class BlackHole:
    """A PostgreSQL address that takes connections and never answers: a connect waits out its
    connect_timeout. Counts the connections made to it."""

    def __init__(self) -> None:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._taken: list[socket.socket] = []
        self.url = f"postgresql://postgres@127.0.0.1:{self._listener.getsockname()[1]}/history"

    def connections(self) -> int:
        """Connections made so far (taken from the backlog, and held, never answered)."""
        while True:
            try:
                self._taken.append(self._listener.accept()[0])
            except BlockingIOError:
                return len(self._taken)

    def close(self) -> None:
        for s in [*self._taken, self._listener]:
            s.close()


@pytest.fixture
def black_hole(monkeypatch: pytest.MonkeyPatch) -> Iterator[BlackHole]:
    from sparkwatch.history import engine

    # Each attempt ends in 2 s (psycopg's floor), not the history's 10.
    monkeypatch.setattr(engine, "PG_CONNECT_TIMEOUT_SECONDS", 2)
    hole = BlackHole()
    yield hole
    hole.close()


def test_stop_drops_queued_plans_retries_nothing_and_ends_the_thread_within_its_deadline(
    black_hole: BlackHole,
) -> None:
    settings = SimpleNamespace(history_url=black_hole.url, history_migrate=False)
    reader = make_plan_reader(SimpleNamespace(_jsparkSession=None), APP, MetricState(), settings)
    for i in range(3):  # three runs' plans: one being written, two queued behind it
        reader(progress(f"q{i}", f"r{i}"))
    wait_for(lambda: black_hole.connections() == 1, 5, "the first plan's write connecting")
    start = time.monotonic()
    reader.stop(3.0)
    took = time.monotonic() - start
    # The attempt in hand ends at its 2 s connect timeout; then no retry and no queued plan.
    assert not reader.worker.is_alive(), "the sparkwatch-plans thread outlived stop()"
    assert took < 3.0, took
    assert black_hole.connections() == 1, "a connection made after the stop"
