"""Counters accumulate across batches, so increase() between two scrapes is exact even when several
batches (and a restart) fall in between."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import sparkwatch
from tests.support import wait_for
from tests.workloads import progress_dicts, write_batches

pytestmark = pytest.mark.spark


def rows_updated_total(att: Any, query_id: str) -> float:
    text = generate_latest(att.registry).decode()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (
                s.name == "spark_streaming_state_rows_updated_total"
                and s.labels["query_id"] == query_id
            ):
                return s.value
    raise AssertionError("no rows-updated counter for the query")


def run_available(spark: Any, src: Any, checkpoint: Any) -> Any:
    from pyspark.sql import functions as F

    df = (
        spark.readStream.schema("ts TIMESTAMP, key STRING, v LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
    )
    query = (
        df.groupBy("key", "v")
        .agg(F.count("*"))
        .writeStream.format("noop")
        .outputMode("update")
        .queryName("counted")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    return query


def test_increase_between_scrapes_equals_sum_of_batches_rows_updated(
    spark: Any, tmp_path: Any
) -> None:
    att = sparkwatch.attach(spark, metrics_port=0, history_url="off")
    try:
        src, ckpt = tmp_path / "in", tmp_path / "ckpt"
        write_batches(src, batches=2, rows=10)
        first = run_available(spark, src, ckpt)
        qid = str(first.id)
        att.flush(10)
        wait_for(lambda: not att.state.query(att.app.id, qid).active, 30, "first run to end")
        before = rows_updated_total(att, qid)

        # four more batches, in a new run of the same query, before the next scrape
        write_batches(src, batches=6, rows=10)  # part-0002 .. part-0005 are new
        second = run_available(spark, src, ckpt)
        assert str(second.id) == qid and str(second.runId) != str(first.runId)
        wait_for(
            lambda: (
                att.state.query(att.app.id, qid).run_id == str(second.runId)
                and not att.state.query(att.app.id, qid).active
            ),
            30,
            "second run to end",
        )
        after = rows_updated_total(att, qid)

        batches = progress_dicts(second)
        assert len(batches) >= 4
        expected = sum(p["stateOperators"][0]["numRowsUpdated"] for p in batches)
        assert expected > 0
        assert after - before == expected
    finally:
        att.detach()
