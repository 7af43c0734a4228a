"""Spark's listener bus on real Spark: with a tiny ``streams`` queue and a slow listener Spark
drops events; the spark_streaming_listener_bus_* series count exactly what Spark counted, pass
``promtool check metrics``, and the alert fires on those very samples (promtool test rules)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.config import duration_seconds
from sparkwatch.dashboards.files import PACKAGE_DIR
from sparkwatch.dashboards.promtool_model import render
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.listener_bus import BusQueue, BusSample
from tests.conftest import ROOT, unavailable
from tests.listener_bus_app import STREAMS_CAPACITY

pytestmark = pytest.mark.spark

ALERT = "SparkListenerBusDroppingEvents"


@pytest.fixture(scope="module")
def dropped_run() -> dict[str, Any]:
    """One Spark application of its own (a queue's capacity is fixed when its context starts)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        unavailable("pyspark not installed")
    # the full profile: every bus family is checked, the default keeps only what alerts read
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARKWATCH_METRICS_PROFILE": "full"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.listener_bus_app"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    out["stderr"] = done.stderr
    return out


def bus_samples(exposition: str) -> dict[tuple[str, str], float]:
    """(series name, queue) -> value of the listener-bus series."""
    return {
        (s.name, s.labels.get("queue", "")): s.value
        for family in text_string_to_metric_families(exposition)
        for s in family.samples
        if s.name.startswith("spark_streaming_listener_bus_")
    }


def test_the_dropped_series_equals_what_spark_counted_per_queue(
    dropped_run: dict[str, Any],
) -> None:
    after = bus_samples(dropped_run["after"])
    jvm = dropped_run["jvm"]
    assert jvm["streams"]["dropped"] > 0
    for queue, counts in jvm.items():
        assert after[(cat.LISTENER_BUS_EVENTS_DROPPED.name, queue)] == counts["dropped"], queue
        assert after[(cat.LISTENER_BUS_QUEUE_SIZE.name, queue)] == counts["size"] == 0
    assert after[(cat.LISTENER_BUS_QUEUE_CAPACITY.name, "streams")] == STREAMS_CAPACITY
    assert after[(cat.LISTENER_BUS_QUEUE_CAPACITY.name, "appStatus")] == 10_000
    posted = after[(cat.LISTENER_BUS_EVENTS_POSTED.name, "")]
    processed = after[(cat.LISTENER_BUS_EVENTS_PROCESSED.name, "streams")]
    # Every event posted was either handed to the streams queue's listeners or dropped from it.
    assert processed > 0 and processed + jvm["streams"]["dropped"] <= posted
    assert after[(cat.LISTENER_BUS_PROCESSING_MEAN.name, "streams")] > 0


def test_the_series_start_at_zero_before_anything_is_dropped(dropped_run: dict[str, Any]) -> None:
    before = bus_samples(dropped_run["before"])
    dropped = cat.LISTENER_BUS_EVENTS_DROPPED.name
    drops = {q: v for (name, q), v in before.items() if name == dropped}
    assert drops and set(drops.values()) == {0}  # so increase() sees the first drop


def test_the_stop_line_reports_spark_s_drops(dropped_run: dict[str, Any]) -> None:
    total = sum(q["dropped"] for q in dropped_run["jvm"].values())
    assert (
        f"sparkwatch stopped for {dropped_run['app_id']}: " in dropped_run["stderr"]
        and f"(Spark's listener bus dropped {total} events for all listeners)"
        in dropped_run["stderr"]
    ), dropped_run["stderr"][-2000:]


def test_the_exposition_passes_promtool_check_metrics(
    dropped_run: dict[str, Any], promtool: str
) -> None:
    done = subprocess.run([promtool, "check", "metrics"], input=dropped_run["after"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_alert_fires_on_the_real_samples(
    dropped_run: dict[str, Any], promtool: str, tmp_path: Path
) -> None:
    """The real before/after samples, one minute apart, through the committed alert rules."""
    app = {"app_name": dropped_run["app_name"], "app_id": dropped_run["app_id"]}
    before = bus_samples(dropped_run["before"])[(cat.LISTENER_BUS_EVENTS_DROPPED.name, "streams")]
    after = bus_samples(dropped_run["after"])[(cat.LISTENER_BUS_EVENTS_DROPPED.name, "streams")]
    rule = next(r for g in yaml.safe_load((PACKAGE_DIR / rulefiles.ALERTS_FILE).read_text())
                ["groups"] for r in g["rules"] if r["alert"] == ALERT)
    labels = {**app, "queue": "streams"}
    selector = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    info = ", ".join(f'{k}="{v}"' for k, v in {**app, "mode": "jvm", "version": "x"}.items())
    fire_at = 2 + int(duration_seconds(rule["for"]) // 60)
    annotations = {k: render(v, labels) for k, v in rule["annotations"].items()}
    test = {
        "rule_files": [str(PACKAGE_DIR / rulefiles.ALERTS_FILE)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": f"{cat.LISTENER_BUS_EVENTS_DROPPED.name}{{{selector}}}",
                 "values": f"{before:g} {before:g} {after:g}x30"},
                {"series": f"{cat.LISTENER_INFO.name}{{{info}}}", "values": "1x32"},
            ],
            "alert_rule_test": [
                {"eval_time": "1m", "alertname": ALERT, "exp_alerts": []},
                {"eval_time": f"{fire_at}m", "alertname": ALERT,
                 "exp_alerts": [{"exp_labels": {**labels, "tenant": "default", **rule["labels"]},
                                 "exp_annotations": annotations}]},
            ],
        }],
    }
    path = tmp_path / "bus.test.yaml"
    path.write_text(yaml.safe_dump(test))
    done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_a_sample_sums_the_drops_of_every_queue() -> None:
    sample = BusSample(posted=90, queues=(
        BusQueue("appStatus", dropped=0, size=0, capacity=10_000),
        BusQueue("streams", dropped=7, size=2, capacity=2),
        BusQueue("eventLog", dropped=5, size=0, capacity=10_000),
    ))
    assert sample.dropped == 12
