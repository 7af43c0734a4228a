"""Operator identity on real local Spark: the attached listener reads each running query's
executed plan and maps every operator kind of the demo, and chained operators in Spark's order,
to the exporter's info metric and the history."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import sparkwatch
from sparkwatch.history.reader import HistoryReader
from sparkwatch.plan.model import QueryPlan, Source
from tests import stateful_scenarios, workloads
from tests.stateful_scenarios import SCENARIOS, Scenario, workload_input
from tests.support import wait_for
from tests.test_plan import EXPECTED, check
from tests.workloads import WORKLOADS, supported

pytestmark = [pytest.mark.spark]

LIVE_SCENARIOS = ("chained", "two_aggregations")


def scenario(name: str) -> Scenario:
    if name in SCENARIOS:
        return SCENARIOS[name]
    w = WORKLOADS[name]
    return Scenario(name, w.build, w.output_mode, workload_input, w.inputs, w.provider)


def plan_of(att: Any, query: Any) -> QueryPlan | None:
    state = att.state.query(att.app.id, str(query.id))
    plan = state.plan if state is not None else None
    return plan if plan is not None and plan.run_id == str(query.runId) else None


def run_until_planned(spark: Any, att: Any, names: list[str], root: Path) -> dict[str, Any]:
    """Start ``names`` on a processing-time trigger (so they are still running when the plan is
    read), stop each once its plan is in; returns name -> (query id, plan)."""
    trigger = {"processingTime": "1 second"}
    queries = {n: stateful_scenarios.start(spark, scenario(n), root / n, trigger) for n in names}
    out: dict[str, Any] = {}

    def stop_planned() -> bool:
        for name, query in queries.items():
            plan = plan_of(att, query)
            if name not in out and plan is not None:
                query.stop()
                out[name] = (str(query.id), plan)
        return len(out) == len(queries)

    try:
        wait_for(stop_planned, 120, f"the plans of {', '.join(names)}")
    finally:
        for query in queries.values():
            query.stop()
    return out


@pytest.fixture(scope="module")
def attached(spark: Any, tmp_path_factory: Any) -> Iterator[tuple[Any, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('plans') / 'history.db'}"
    att = sparkwatch.attach(spark, metrics_port=0, history_url=url, history_flush_seconds=0.2)
    yield att, url
    att.detach()


@pytest.fixture(scope="module")
def planned(spark: Any, attached: tuple[Any, str], tmp_path_factory: Any) -> dict[str, Any]:
    att, _ = attached
    names = [*supported(), *LIVE_SCENARIOS]
    root = tmp_path_factory.mktemp("live")
    # JVM-only queries together; Python-worker ones alone (2 cores, Spark's connect-back timeout).
    jvm = [n for n in names if n in SCENARIOS or not WORKLOADS[n].python_worker]
    waves = [jvm] + [[n] for n in names if n not in jvm]
    out: dict[str, Any] = {}
    for wave in waves:
        out.update(run_until_planned(spark, att, wave, root))
    return out


@pytest.mark.parametrize("name", [*supported(), *LIVE_SCENARIOS])
def test_running_query_maps_to_its_plan(planned: dict[str, Any], name: str) -> None:
    _, plan = planned[name]
    assert plan.source is Source.PLAN, plan.note
    assert len(plan.operators) == len(EXPECTED[name])
    for op, want in zip(plan.operators, EXPECTED[name], strict=True):
        check(op, want)
        assert op.num_state_stores == 2  # the session's spark.sql.shuffle.partitions
        assert op.checkpoint_location is not None
        assert op.checkpoint_location.endswith(f"/{name}/checkpoint/state/{op.operator_id}")


def test_info_metric_identifies_chained_operators(
    planned: dict[str, Any], attached: tuple[Any, str]
) -> None:
    att, _ = attached
    query_id, _ = planned["chained"]
    text = generate_latest(att.registry).decode()
    samples = [
        s.labels
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "spark_streaming_state_operator_info" and s.labels["query_id"] == query_id
    ]
    by_index = {labels["operator_index"]: labels for labels in samples}
    assert set(by_index) == {"0", "1"}
    assert {k: by_index["0"][k] for k in ("operator", "kind", "keys", "source")} == {
        "operator": "stateStoreSave", "kind": "aggregation", "keys": "window,key", "source": "plan"
    }
    assert {k: by_index["1"][k] for k in ("operator", "kind", "keys", "watermark_column")} == {
        "operator": "dedupe", "kind": "dedupe", "keys": "key,ts", "watermark_column": "ts"
    }
    assert by_index["1"]["watermark_delay_seconds"] == "5"
    assert by_index["1"]["state_store_provider"] == "hdfs"


def test_history_keeps_the_plan_of_each_run(
    planned: dict[str, Any], attached: tuple[Any, str]
) -> None:
    att, url = attached
    assert att.flush(30) and att.plans.flush(30)
    for name in ("chained", "stream_join"):
        query_id, plan = planned[name]
        with HistoryReader(url) as reader:
            [stored] = reader.plans(query_id)
        assert (stored.run_id, stored.source) == (plan.run_id, Source.PLAN)
        assert stored.operators == plan.operators


def test_a_query_that_ended_before_its_plan_was_read_still_maps(
    spark: Any, attached: tuple[Any, str], tmp_path: Path
) -> None:
    """availableNow queries can end right after their first progress: the handle taken when the
    run started keeps the plan readable."""
    att, _ = attached
    query = workloads.start(spark, "global_limit", tmp_path)
    assert query.awaitTermination(120) and query.exception() is None
    wait_for(lambda: plan_of(att, query) is not None, 60, "the plan of the ended query")
    plan = plan_of(att, query)
    assert plan is not None and plan.source is Source.PLAN, plan.note
    assert plan.operators[0].details["limit"] == 25
