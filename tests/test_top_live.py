"""`sparkwatch top` in a pseudo-terminal against the /metrics of a running Spark app (the attached
listener's embedded exporter): it renders every query's operators with their plan identity and
reacts to sort, filter, drill-down and quit keys."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import sparkwatch
from tests import stateful_scenarios
from tests.support import wait_for
from tests.test_plan_spark import scenario
from tests.top_terminal import has, query_rows, quit_top, running_top, wait_frame

pytestmark = [pytest.mark.spark]

RUNNING = ("window_agg", "dedupe", "chained")


@pytest.fixture(scope="module")
def exporter(spark: Any, tmp_path_factory: Any) -> Iterator[str]:
    """Three queries running on a processing-time trigger, their plans read; the /metrics URL."""
    att = sparkwatch.attach(spark, metrics_port=0, history_url="off")
    root = tmp_path_factory.mktemp("top")
    trigger = {"processingTime": "1 second"}
    queries = [stateful_scenarios.start(spark, scenario(n), root / n, trigger) for n in RUNNING]
    try:
        for q in queries:
            wait_for(lambda q=q: _planned(att, q), 120, f"the plan of {q.name}")
        yield f"http://127.0.0.1:{att.metrics_port}/metrics"
    finally:
        for q in queries:
            q.stop()
        att.detach()


def _planned(att: Any, query: Any) -> bool:
    state = att.state.query(att.app.id, str(query.id))
    return state is not None and state.plan is not None and state.plan_source().value == "plan"


def test_top_renders_operators_and_reacts_to_keys(exporter: str) -> None:
    with running_top("--metrics", exporter, "--interval", "0.5") as child:
        lines = wait_frame(child, has("dedupe on [key, ts]"), "the plan identities")
        assert has("#0 stateStoreSave")(lines) and has("#1 dedupe")(lines)
        assert has("aggregation on [window, key], append, watermark ts 5s, 2 stores, hdfs")(lines)
        assert "sort: growth" in lines[0]

        child.send("n")
        lines = wait_frame(child, lambda ls: "sort: name" in ls[0], "sort by name")
        assert [row[0] for row in query_rows(lines)] == sorted(RUNNING)

        child.send("s")
        lines = wait_frame(child, lambda ls: "sort: rows" in ls[0], "sort by state rows")
        rows = [int(row[5]) for row in query_rows(lines)]  # name status batch time lag ROWS
        assert rows == sorted(rows, reverse=True) and len(rows) == 3

        child.send("/dedupe\r")
        lines = wait_frame(child, lambda ls: "filter: dedupe" in ls[0], "the filter")
        assert "3 queries (2 shown)" in lines[0]
        assert sorted(row[0] for row in query_rows(lines)) == ["chained", "dedupe"]

        child.send("\x1b")  # esc clears the filter
        lines = wait_frame(child, lambda ls: "filter:" not in ls[0], "the filter cleared")
        child.send("n")
        child.send("kkk")  # the mark follows its query through sorts: up to the first by name
        child.send("\r")
        lines = wait_frame(child, has("query chained"), "the detail of chained")
        assert has("#1 dedupe: dedupe on [key, ts], append, watermark ts 5s")(lines)
        assert has("(esc: back to the list)")(lines)

        assert quit_top(child) == 0
