"""The driver side never raises into the app: attach() with its /metrics port taken warns once,
counts it and runs on; with the fallback setting it serves on a free port instead."""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import sparkwatch
from sparkwatch.metrics.exposition import SparkwatchCollector  # noqa: F401 - the app's exporter
from tests.support import wait_for
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


def test_flush_and_detach_honour_one_overall_deadline_with_a_silent_collector(
    spark: Any, tmp_path: Any
) -> None:
    # A server that takes connections (the kernel's backlog) and never answers.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    att = sparkwatch.attach(spark, metrics_enabled=False, history_url="off",
                            push_url=f"http://127.0.0.1:{silent.getsockname()[1]}/api/v1/events",
                            push_timeout_seconds=30, push_flush_seconds=0.05)
    push = att.push
    assert push is not None
    try:
        query = _run_query(spark, tmp_path)
        assert query.exception() is None
        start = time.monotonic()
        assert att.flush(1.0) is False  # nothing can be delivered
        flushed_in = time.monotonic() - start
    finally:
        start = time.monotonic()
        att.detach(timeout=2.0)
        detached_in = time.monotonic() - start
        silent.close()  # the POST left waiting ends; its thread must not outlive this test
        wait_for(lambda: not push.worker.is_alive(), 10, "the push thread ended")
    # Each within its deadline plus a loaded machine's slack (detach also makes a py4j call),
    # far from the 30 s push timeout they must not wait out.
    assert flushed_in < 2.0 and detached_in < 3.5, (flushed_in, detached_in)
