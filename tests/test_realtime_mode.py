"""Real-time mode (Spark 4.1+, ``trigger(realTime=...)``) on real local Spark: the trigger kind is
read from the JVM, exported and recorded, doctor finds nothing wrong with batches that last their
interval, and the batch-duration alert, evaluated by promtool on the run's own figures, stays
silent where a limit below the interval would have fired.

Spark's real-time mode accepts Kafka and an internal low-latency memory stream as sources (not
the rate or file sources); the test feeds Spark's ``LowLatencyMemoryStream`` over Py4J and writes
to the console sink (both on Spark's real-time allowlist)."""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

import sparkwatch
from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.config import load_config
from sparkwatch.metrics import catalogue as cat
from tests.conftest import unavailable
from tests.support import wait_for
from tests.test_collector_support import samples
from tests.workloads import installed_spark_version

pytestmark = pytest.mark.spark

INTERVAL_SECONDS = 5  # Spark's smallest real-time batch duration by default
BATCHES = 3
ALERT = "SparkStreamingBatchDurationAboveTrigger"


@contextmanager
def real_time_query(spark: Any, checkpoint: Path) -> Iterator[Any]:
    """A stateless real-time query over Spark's low-latency memory stream, fed until it ends."""
    from pyspark.sql import DataFrame

    jvm = spark._jvm
    sources = jvm.org.apache.spark.sql.execution.streaming.sources
    module = getattr(getattr(sources, "LowLatencyMemoryStream$"), "MODULE$")
    stream = module.singlePartition(spark._jsparkSession, jvm.org.apache.spark.sql.Encoders.INT())
    query = (DataFrame(stream.toDF(), spark).writeStream.format("console").outputMode("update")
             .option("numRows", 1).queryName("real_time_probe")
             .option("checkpointLocation", str(checkpoint))
             .trigger(realTime=f"{INTERVAL_SECONDS} seconds").start())
    done = threading.Event()

    def feed() -> None:
        i = 0
        while not done.wait(0.5):  # rows keep arriving, as from Kafka
            stream.addData(jvm.org.apache.spark.api.python.PythonUtils.toSeq([i, i + 1]))
            i += 2

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        yield query
    finally:
        done.set()
        feeder.join(10)
        query.stop()


def test_real_time_mode_is_recorded_and_its_long_batches_raise_no_alert_or_finding(
    spark: Any, tmp_path: Path, promtool: str
) -> None:
    if installed_spark_version() < (4, 1):
        unavailable("real-time mode needs PySpark 4.1+")
    history = f"sqlite:///{tmp_path / 'history.db'}"
    att = sparkwatch.attach(spark, metrics_port=0, history_url=history, push_url="off")
    try:
        with real_time_query(spark, tmp_path / "chk") as query:
            qid = str(query.id)
            wait_for(lambda: _batches(att, qid) >= BATCHES, 120,
                     f"{BATCHES} real-time batches of {INTERVAL_SECONDS} s")
            assert att.flush(30)
            text = _scrape(att.metrics_port)
    finally:
        att.detach()

    [(info, _)] = [(labels, v) for labels, v in samples(text, cat.QUERY_TRIGGER_INFO.name)
                   if labels["query_id"] == qid]
    assert info["trigger"] == "real_time"
    assert _value(text, cat.QUERY_TRIGGER_INTERVAL.name, qid) == INTERVAL_SECONDS
    # A real-time batch lasts its whole interval, reading rows as they come.
    last = _value(text, cat.QUERY_LAST_BATCH_DURATION.name, qid)
    assert INTERVAL_SECONDS <= last < INTERVAL_SECONDS * 1.5, last

    engine = sa.create_engine(history)
    with engine.connect() as conn:
        recorded = conn.execute(sa.text(
            "select trigger_kind, trigger_interval_ms from run_triggers where query_id = :q"),
            {"q": qid}).all()
    engine.dispose()
    assert [tuple(r) for r in recorded] == [("real_time", INTERVAL_SECONDS * 1000)]

    doctor = subprocess.run(
        ["sparkwatch", "doctor", "--url", history, qid, "--format", "json", "--fail-on", "never"],
        capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)
    assert [(c["trigger"], c["trigger_interval_ms"]) for c in report["checked"]] == [
        ("real_time", INTERVAL_SECONDS * 1000)]
    assert [f["code"] for f in report["findings"]] == []

    mean = (_value(text, cat.QUERY_BATCH_DURATION.name + "_sum", qid)
            / _value(text, cat.QUERY_BATCH_DURATION.name + "_count", qid))
    assert mean > 2  # above the limit the rules below are built with
    fired = _alerts_fired(promtool, tmp_path, text, qid, mean, with_trigger=True)
    assert fired == [], "the batch-duration alert fired during normal real-time operation"
    # The same batches without the trigger known (Spark Connect): held to the limit, it fires.
    assert _alerts_fired(promtool, tmp_path, text, qid, mean, with_trigger=False) == [ALERT]


def _batches(att: Any, query_id: str) -> int:
    state = att.state.query(att.app.id, query_id)
    return 0 if state is None else state.batches


def _scrape(port: int | None) -> str:
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _value(text: str, name: str, query_id: str) -> float:
    [value] = [v for labels, v in samples(text, name) if labels["query_id"] == query_id]
    return value


def _alerts_fired(promtool: str, tmp_path: Path, text: str, qid: str, mean: float,
                  with_trigger: bool) -> list[str]:
    """Evaluate the batch-duration alert (built with a 2 s limit, below the real-time interval)
    over an hour of this query's own figures: one batch a minute of its mean duration, its
    trigger info and interval as scraped. Returns the alerts firing at the end."""
    config = load_config(overrides={"alerts": {"batch_duration": {"max_seconds": 2}}})
    rules = tmp_path / "alerts.yaml"
    rules.write_text(yaml.safe_dump(rulefiles.alerting_rules(config), sort_keys=False))
    [(labels, _)] = [(lb, v) for lb, v in samples(text, cat.QUERY_INFO.name)
                     if lb["query_id"] == qid]
    query = {k: labels[k] for k in cat.QUERY_LABELS}

    def series(name: str, values: str, extra: dict[str, str] | None = None) -> dict[str, str]:
        pairs = ", ".join(f'{k}="{v}"' for k, v in {**query, **(extra or {})}.items())
        return {"series": f"{name}{{{pairs}}}", "values": values}

    h = cat.QUERY_BATCH_DURATION.name
    inputs = [series(h + "_sum", f"0+{mean:.3f}x60"), series(h + "_count", "0+1x60")]
    if with_trigger:
        [(info, _)] = [(lb, v) for lb, v in samples(text, cat.QUERY_TRIGGER_INFO.name)
                       if lb["query_id"] == qid]
        interval = _value(text, cat.QUERY_TRIGGER_INTERVAL.name, qid)
        inputs += [series(cat.QUERY_TRIGGER_INFO.name, "1x60", {"trigger": info["trigger"]}),
                   series(cat.QUERY_TRIGGER_INTERVAL.name, f"{interval:g}x60")]
    test = tmp_path / "case.yaml"
    test.write_text(yaml.safe_dump({
        "rule_files": [str(rules)], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": inputs, "alert_rule_test": [
            {"eval_time": "59m", "alertname": ALERT, "exp_alerts": []}]}],
    }, sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", str(test)], capture_output=True,
                          text=True, timeout=120)
    if done.returncode == 0:
        return []
    # promtool names what fired instead: the alert, with this query's labels.
    said = done.stdout + done.stderr
    assert f'alertname="{ALERT}"' in said and f'query_id="{qid}"' in said, said[-2000:]
    return [ALERT]
