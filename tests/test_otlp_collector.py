"""The collector's OTLP export (``--otlp``): events pushed through its ingest API reach a real
decoding receiver with their app and tenant attributes, over OTLP/HTTP and OTLP/gRPC; a receiver
that is down never slows ingest; without the extra the collector refuses to start, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.local import free_port
from sparkwatch.metrics import catalogue as cat
from tests.conftest import CANARY_PASSWORD, CANARY_TOKEN, ROOT
from tests.otlp_receiver import grpc_receiver, http_receiver
from tests.support import wait_for
from tests.test_collector_support import APP, APP_TOKEN, Collector, recorded, run_events, samples

FAST = {"OTEL_METRIC_EXPORT_INTERVAL": "200"}


def otlp_collector(tmp_path: Path, env: dict[str, str]) -> Collector:
    return Collector("off", tmp_path / "spool", "--otlp", env={**FAST, **env})


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_pushed_events_reach_the_receiver_with_app_and_tenant_attributes(
    tmp_path: Path, protocol: str
) -> None:
    receiver = http_receiver if protocol == "http/protobuf" else grpc_receiver
    data = recorded("window_agg_hdfs")
    with receiver() as (url, received):
        collector = otlp_collector(tmp_path, {
            "OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20to-the-receiver",
            "OTEL_RESOURCE_ATTRIBUTES": "k8s.namespace.name=streaming"}).start()
        try:
            # The app's own token: its tenant is "default".
            response = collector.post(run_events("window_agg_hdfs", terminated=False),
                                      token=APP_TOKEN)
            assert response.status_code == 200, response.text
            want = sum(p["numInputRows"] for p in data["progress"])
            query_id = data["started"]["id"]
            received.wait(lambda: [p.value for p in received.latest(
                cat.QUERY_INPUT_ROWS.name, query_id=query_id)] == [want])
            exposed = samples(collector.metrics(), cat.QUERY_INPUT_ROWS.name)
        finally:
            collector.stop()
        rows = received.latest(cat.QUERY_INPUT_ROWS.name, query_id=query_id)[0]
        assert rows.attributes == {"tenant": "default", "app_name": APP["name"],
                                   "app_id": APP["id"], "query_id": query_id,
                                   "query_name": data["started"]["name"]}
        # The same series, the same value as the collector's own /metrics.
        assert [(labels, value) for labels, value in exposed] == [(
            {k: str(v) for k, v in rows.attributes.items()}, float(want))]
        op = data["progress"][-1]["stateOperators"][0]
        state_rows = received.latest(cat.STATE_ROWS.name, query_id=query_id)[0]
        assert state_rows.value == op["numRowsTotal"]
        assert state_rows.attributes["operator"] == op["operatorName"]
        assert received.last_headers()["authorization"] == "Bearer to-the-receiver"
        assert rows.resource["service.name"] == "sparkwatch-collector"
        assert rows.resource["k8s.namespace.name"] == "streaming"
        stalled = received.latest(cat.QUERY_STALLED.name, query_id=query_id)[0]
        assert (stalled.kind, stalled.value) == ("gauge", 0)
        assert stalled.attributes["tenant"] == "default"


def test_sigterm_sends_a_final_export_of_what_ingest_took(tmp_path: Path) -> None:
    data = recorded("window_agg_hdfs")
    with http_receiver() as (url, received):
        # An hour's interval: only the export at shutdown can carry the events.
        collector = Collector("off", tmp_path / "spool", "--otlp", env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_METRIC_EXPORT_INTERVAL": "3600000"}).start()
        try:
            response = collector.post(run_events("window_agg_hdfs", terminated=False))
            assert response.status_code == 200, response.text
            assert received.count() == 0
        finally:
            collector.stop()  # SIGTERM, waits for the exit
        assert received.count() == 1
        batches = received.latest(cat.QUERY_BATCHES.name, query_id=data["started"]["id"])
    assert [p.value for p in batches] == [len(data["progress"])]


def test_a_down_receiver_never_slows_ingest_and_failures_are_counted_and_said_once(
    tmp_path: Path,
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    collector = otlp_collector(tmp_path, {"OTEL_EXPORTER_OTLP_ENDPOINT": nobody,
                                          "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}).start()
    try:
        for _ in range(3):
            response = collector.post(run_events("window_agg_hdfs", terminated=False))
            assert response.status_code == 200, response.text
            assert response.elapsed.total_seconds() < 2

        def failed() -> float:
            found = samples(collector.metrics(), "sparkwatch_collector_otlp_exports_total")
            return sum(v for labels, v in found if labels["outcome"] == "failed")

        wait_for(lambda: failed() >= 2, 60, "two failed OTLP exports counted")
        assert samples(collector.metrics(), cat.QUERY_INPUT_ROWS.name)  # /metrics goes on
    finally:
        collector.stop()
    said = [line for line in collector.log_text().splitlines() if "OTLP export to" in line]
    assert len(said) == 1 and nobody in said[0], said


def test_without_the_extra_the_collector_refuses_to_start_naming_it(tmp_path: Path) -> None:
    code = ("import sys\n"
            "# As if the otlp extra were not installed (FastAPI brings opentelemetry-api itself).\n"
            "sys.modules['opentelemetry.sdk'] = sys.modules['opentelemetry.exporter'] = None\n"
            "from sparkwatch.cli.main import main\n"
            f"sys.exit(main(['collector', '--no-auth', '--otlp', '--history-url', 'off', "
            f"'--port', '{free_port()}', '--spool-dir', {str(tmp_path / 'spool')!r}]))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "pip install 'sparkwatch[otlp]'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_sdk_s_log_lines_show_neither_the_endpoint_s_password_nor_its_query_token(
    tmp_path: Path,
) -> None:
    """The SDK's exporter logs the URL it retries, query string and all, before our own (redacted)
    warning; Collector.stop fails the test if either canary reaches the collector's log."""
    port = free_port()  # nothing listens there
    collector = otlp_collector(tmp_path, {
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT":
            f"http://otuser:{CANARY_PASSWORD}@127.0.0.1:{port}/v1/metrics?token={CANARY_TOKEN}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2.5"}).start()  # one retry: the SDK logs the URL then
    try:
        response = collector.post(run_events("window_agg_hdfs", terminated=False))
        assert response.status_code == 200, response.text

        def failed() -> float:
            found = samples(collector.metrics(), "sparkwatch_collector_otlp_exports_total")
            return sum(v for labels, v in found if labels["outcome"] == "failed")

        wait_for(lambda: failed() >= 1, 60, "a failed OTLP export counted")
    finally:
        collector.stop()  # asserts that no canary reached the log
    log = collector.log_text()
    assert "Max retries exceeded with url: /v1/metrics?***" in log, log
    assert f"OTLP export to http://otuser:***@127.0.0.1:{port}/v1/metrics?… " in log, log


@pytest.mark.parametrize(("name", "value"), [
    ("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://u:{CANARY_PASSWORD}@[bad"),
    ("OTEL_EXPORTER_OTLP_HEADERS", f"authorization:{CANARY_TOKEN}"),
    ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", f"Authorization=Bearer%20X,bad header={CANARY_TOKEN}"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "nan"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "0.0001"),
], ids=["endpoint", "headers", "metrics-headers", "timeout", "interval"])
def test_a_bad_otel_variable_stops_the_collector_s_start_naming_it(
    tmp_path: Path, name: str, value: str
) -> None:
    """Accepted before: the SDK logged the value on every export, dropped the header (exports
    without authentication) or flooded the receiver."""
    args = [sys.executable, "-m", "sparkwatch.cli.main", "collector", "--no-auth", "--otlp",
            "--history-url", "off", "--port", str(free_port()),
            "--spool-dir", str(tmp_path / "spool")]
    env = {**os.environ, name: value}
    result = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30,
                            check=False)
    assert result.returncode == 2, result.stderr
    assert f"sparkwatch collector: error: {name}" in result.stderr, result.stderr
    assert CANARY_PASSWORD not in result.stderr and CANARY_TOKEN not in result.stderr
    assert "Traceback" not in result.stderr
