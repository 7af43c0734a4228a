"""End to end on real local Spark: the listener's push sink -> a collector process on localhost ->
/metrics and the PostgreSQL history, and a collector outage while a query runs."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import sparkwatch
from tests.support import wait_for
from tests.test_collector_support import (
    TOKEN,
    Collector,
    count_rows,
    envelope,
    samples,
    scalar,
)
from tests.workloads import progress_dicts, run_to_completion

pytestmark = [pytest.mark.spark, pytest.mark.postgres]

WORKLOADS = ("window_agg", "dedupe", "stream_join")
OUTAGE_SECONDS = 15.0
"""Fifteen retry rounds of the push sink (retries at most 1 s apart) and some 75 batches of the
200 ms trigger: enough to compare the pace during the outage with the pace before it."""


@pytest.fixture
def collector(pg_url: str, tmp_path: Path) -> Iterator[Collector]:
    c = Collector(pg_url, tmp_path / "collector-spool")
    c.start()
    yield c
    c.stop()


def attach_pushing(spark: Any, collector: Collector, **overrides: Any) -> Any:
    return sparkwatch.attach(
        spark, metrics_enabled=False, history_url="off", push_url=collector.ingest_url,
        push_token=TOKEN, push_flush_seconds=0.2, push_retry_max_seconds=1.0, **overrides)


def test_pushed_events_become_app_labelled_metrics_and_one_history_row_per_batch_and_operator(
    spark: Any, collector: Collector, tmp_path_factory: Any
) -> None:
    att = attach_pushing(spark, collector)
    try:
        queries = run_to_completion(spark, list(WORKLOADS), tmp_path_factory.mktemp)
        for name, query in queries.items():
            # Spark's listener bus delivers the last events after awaitTermination returns.
            wait_for(lambda q=query: _ended(att, str(q.id)), 30, f"{name} terminated event")
        assert att.flush(60), "the push sink did not deliver everything"
    finally:
        att.detach()
    assert att.counters.dropped == {} and att.counters.delivery_failures == {}
    text = collector.metrics()
    url = collector.history_url
    for name, query in queries.items():
        progress = progress_dicts(query)
        latest = query.lastProgress
        last = json.loads(latest.json) if hasattr(latest, "json") else dict(latest)
        assert last == progress[-1]
        qid = str(query.id)
        rows = {
            labels["operator_index"]: (labels, value)
            for labels, value in samples(text, "spark_streaming_state_rows")
            if labels["query_id"] == qid
        }
        assert len(rows) == len(last["stateOperators"]), name
        for index, op in enumerate(last["stateOperators"]):
            labels, value = rows[str(index)]
            assert value == op["numRowsTotal"], f"{name} operator {index}"
            assert (labels["app_name"], labels["app_id"], labels["operator"]) == (
                att.app.name, att.app.id, op["operatorName"])
        _history_matches(url, str(query.runId), progress, last, name)


def test_pushed_plans_name_operators_at_the_collector_as_the_driver_does(
    spark: Any, collector: Collector, tmp_path_factory: Any
) -> None:
    """Operator identity in push mode: the plan each run's driver read from its executed plan
    reaches the collector's /metrics and history, label for label."""
    from sparkwatch.plan.describe import OPERATOR_IDENTITY_LABELS, label_values

    att = attach_pushing(spark, collector)
    try:
        queries = run_to_completion(spark, ["window_agg", "stream_join"],
                                    tmp_path_factory.mktemp)
        for name, query in queries.items():
            wait_for(lambda q=query: _ended(att, str(q.id)), 30, f"{name} terminated event")
        assert att.flush(60), "the push sink did not deliver everything"
    finally:
        att.detach()
    text = collector.metrics()
    for name, query in queries.items():
        qid, run_id = str(query.id), str(query.runId)
        driver = att.state.query(att.app.id, qid)
        assert driver is not None and driver.plan is not None, name
        assert driver.plan.source.value == "plan", (name, driver.plan.note)
        served = {labels["operator_index"]: labels
                  for labels, _ in samples(text, "spark_streaming_state_operator_info")
                  if labels["query_id"] == qid}
        assert len(served) == len(driver.plan.operators) > 0, name
        for op in driver.plan.operators:
            got = tuple(served[str(op.index)][k] for k in OPERATOR_IDENTITY_LABELS)
            assert got == label_values(op, driver.plan.source), (name, op.index)
        operators = len(driver.plan.operators)
        wait_for(lambda r=run_id, n=operators: count_rows(
            collector.history_url, "select count(*) from operator_plans where run_id = :r "
            "and source = 'plan'", r=r) == n, 30, f"{name}'s plan in the collector's history")
        engine = sa.create_engine(collector.history_url)
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "select operator_index, operator_name, kind, keys from operator_plans "
                "where run_id = :r order by operator_index"), {"r": run_id}).all()
        engine.dispose()
        assert [(r.operator_index, r.operator_name, r.kind, list(r.keys)) for r in rows] == [
            (op.index, op.operator, op.kind, list(op.keys)) for op in driver.plan.operators]
    kinds = {served_kind for labels, _ in samples(text, "spark_streaming_state_operator_info")
             if (served_kind := labels["kind"])}
    assert {"aggregation", "stream_stream_join"} <= kinds


def _ended(att: Any, query_id: str) -> bool:
    state = att.state.query(att.app.id, query_id)
    return state is not None and not state.active


def _history_matches(url: str, run_id: str, progress: list[dict[str, Any]],
                     last: dict[str, Any], name: str) -> None:
    wait_for(lambda: count_rows(url, "select count(*) from batches where run_id = :r",
                                r=run_id) == len(progress), 30, f"{name} batches")
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        got = conn.execute(sa.text(
            "select batch_id, operator_index, count(*) over (partition by batch_id, "
            "operator_index) as copies, num_rows_total, num_rows_updated, memory_used_bytes "
            "from operator_batches where run_id = :r order by batch_id, operator_index"),
            {"r": run_id}).all()
    engine.dispose()
    expected = [(p["batchId"], i) for p in progress for i in range(len(p["stateOperators"]))]
    assert [(r.batch_id, r.operator_index) for r in got] == expected, name
    assert {r.copies for r in got} == {1}
    final = [r for r in got if r.batch_id == last["batchId"]]
    assert [(r.num_rows_total, r.num_rows_updated, r.memory_used_bytes) for r in final] == [
        (op["numRowsTotal"], op["numRowsUpdated"], op["memoryUsedBytes"])
        for op in last["stateOperators"]], name


def _rate_query(spark: Any, checkpoint: Path) -> Any:
    from pyspark.sql import functions as F

    df = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    agg = df.groupBy((F.col("value") % 7).alias("k")).count()
    return (agg.writeStream.format("noop").outputMode("update").queryName("outage")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def _epoch(p: dict[str, Any]) -> float:
    return datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()


def _durations(progress: list[dict[str, Any]], since: float, until: float) -> list[int]:
    return [p["batchDuration"] for p in progress if since <= _epoch(p) < until]


def test_a_collector_outage_costs_spark_nothing_and_loses_nothing(
    spark: Any, collector: Collector, tmp_path: Path
) -> None:
    """A 15 s collector outage (SIGKILL, then restart): batches keep their pace while every push
    fails, and everything is delivered once the collector is back (memory buffer: 10000)."""
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
    att = attach_pushing(spark, collector)
    query = _rate_query(spark, tmp_path / "checkpoint")
    try:
        wait_for(lambda: len(query.recentProgress) >= 10, 120, "10 batches before the outage")
        down_at = time.time()
        collector.kill()  # SIGKILL: requests in flight may be accepted but never answered
        wait_for(lambda: time.time() - down_at >= OUTAGE_SECONDS, OUTAGE_SECONDS + 5, "outage")
        up_at = time.time()
        assert att.counters.delivery_failures.get("push", 0) > 0
        collector.start()
        wait_for(lambda: time.time() - up_at >= 2, 10, "batches after the restart")
    finally:
        query.stop()
        spark.conf.unset("spark.sql.streaming.numRecentProgressUpdates")
    progress = progress_dicts(query)
    assert att.flush(60), "the backlog was not delivered after the restart"
    att.detach()

    # Pace: batches per second and their duration, before and during the outage.
    warm = _epoch(progress[3])
    before = _durations(progress, warm, down_at)
    during = _durations(progress, down_at, up_at)
    rates = (len(before) / (down_at - warm), len(during) / (up_at - down_at))
    assert rates[1] >= rates[0] * 0.5, f"batches per second fell from {rates[0]} to {rates[1]}"
    assert statistics.median(during) <= statistics.median(before) * 2 + 100, (before, during)
    assert att.counters.dropped == {}, "nothing dropped within the buffer bound"
    assert att.stats().received["progress"] == len(progress)

    run_id, qid = str(query.runId), str(query.id)
    url = collector.history_url
    wait_for(lambda: count_rows(url, "select count(*) from batches where run_id = :r",
                                r=run_id) == len(progress), 30, "every batch in the history")
    first, last = (scalar(url, f"select {f}(batch_id) from batches where run_id = :r", r=run_id)
                   for f in ("min", "max"))
    assert (first, last) == (progress[0]["batchId"], progress[-1]["batchId"])

    def batches_total() -> float:
        [value] = [v for labels, v in samples(collector.metrics(),
                                               "spark_streaming_query_batches_total")
                   if labels["query_id"] == qid]
        return value

    # The collector restarted with only its unwritten spool in memory: its counter restarted too.
    # Redelivering the last 100 batches again changes neither /metrics nor the history.
    counted = batches_total()
    app = {"name": att.app.name, "id": att.app.id, "spark_version": att.app.spark_version}
    again = collector.post([envelope("progress", p, app) for p in progress[-100:]]).json()
    assert again["duplicates"] == min(100, len(progress))
    assert batches_total() == counted
    assert int(scalar(url, "select count(*) from batches where run_id = :r", r=run_id)) == \
        len(progress)
