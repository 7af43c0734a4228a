"""The driver side never raises into the app: attach() with its /metrics port taken warns once,
counts it and runs on; with the fallback setting it serves on a free port instead."""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import sparkwatch
from sparkwatch.metrics.exposition import SparkwatchCollector  # noqa: F401 - the app's exporter
from tests.test_collector_support import samples

pytestmark = pytest.mark.spark


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _exposition(att: Any) -> str:
    from prometheus_client import generate_latest

    return generate_latest(att.registry).decode()


def _run_query(spark: Any, tmp_path: Any) -> Any:
    from pyspark.sql import functions as F

    src = tmp_path / "in"
    src.mkdir()
    (src / "part-0.json").write_text('{"k": 1}\n{"k": 2}\n{"k": 1}\n')
    name = f"port_taken_{uuid.uuid4().hex[:6]}"
    query = (spark.readStream.schema("k INT").json(str(src)).groupBy("k").agg(F.count("*"))
             .writeStream.format("noop").outputMode("update").queryName(name)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    return query


def test_a_taken_metrics_port_warns_once_and_the_query_runs(
    spark: Any, tmp_path: Any, taken_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sparkwatch"):
        att = sparkwatch.attach(spark, metrics_port=taken_port, history_url="off")
    try:
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and f"metrics port {taken_port}" in warnings[0].getMessage()
        assert att.metrics_port is None
        query = _run_query(spark, tmp_path)
        assert query.exception() is None
        assert att.flush(30)
        text = _exposition(att)
        assert [v for labels, v in samples(text, "spark_streaming_listener_errors_total")
                if labels["where"] == "metrics_server"] == [1.0]
        assert any(labels["query_id"] == str(query.id) for labels, _ in
                   samples(text, "spark_streaming_query_batches_total"))
    finally:
        att.detach()


def test_the_fallback_setting_serves_on_a_free_port_instead(
    spark: Any, taken_port: int
) -> None:
    att = sparkwatch.attach(spark, metrics_port=taken_port, metrics_port_fallback=True,
                            history_url="off")
    try:
        assert att.metrics_port not in (None, taken_port)
    finally:
        att.detach()
