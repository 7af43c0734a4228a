"""OTLP export: what a real receiver decodes (``opentelemetry-proto``) equals the progress events
that were sent, over OTLP/HTTP and OTLP/gRPC, from the bridge and from the listener. The
collector's side is in tests/test_otlp_collector.py."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from prometheus_client import generate_latest

from bench.local import QuietHandler, free_port, served
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics import profiles
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.otlp.config import OtlpConfig, otlp_config
from sparkwatch.otlp.convert import Converter, unit_of
from sparkwatch.otlp.export import OtlpExport, start_export
from sparkwatch.settings import SettingsError
from tests.conftest import CANARY_PASSWORD, CANARY_TOKEN, ROOT
from tests.otlp_receiver import Point, Received, flatten, grpc_receiver, http_receiver
from tests.support import wait_for
from tests.test_exposition import APP, fixture, run_events

JOIN = "spark-4.3.0/join_rocksdb.json"
RECEIVERS = {"http/protobuf": http_receiver, "grpc": grpc_receiver}


@contextmanager
def receiving(protocol: str) -> Iterator[tuple[str, Received]]:
    with RECEIVERS[protocol]() as (url, received):
        yield url, received


def config_for(url: str, protocol: str, interval_ms: int = 100) -> OtlpConfig:
    return otlp_config({"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                        "OTEL_METRIC_EXPORT_INTERVAL": str(interval_ms)})


def one(points: list[Point]) -> Point:
    assert len(points) == 1, points
    return points[0]


# --- configuration and mapping ----------------------------------------------------------------


def test_the_standard_variables_choose_protocol_endpoint_interval_and_timeout() -> None:
    assert otlp_config({}) == OtlpConfig("http/protobuf", "http://localhost:4318/v1/metrics",
                                         60.0, 30.0)
    http = otlp_config({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318/",
                        "OTEL_METRIC_EXPORT_INTERVAL": "15000",
                        "OTEL_METRIC_EXPORT_TIMEOUT": "5000"})
    assert (http.endpoint, http.interval_seconds, http.timeout_seconds) == (
        "http://otel:4318/v1/metrics", 15.0, 5.0)
    grpc = otlp_config({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4317"})
    assert (grpc.protocol, grpc.endpoint) == ("grpc", "http://otel:4317")
    assert otlp_config({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}).endpoint == "http://localhost:4317"
    # The metrics signal's own variables win, and its endpoint is taken as it is.
    signal = otlp_config({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                          "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
                          "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
                          "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "https://b/custom"})
    assert (signal.protocol, signal.endpoint) == ("http/protobuf", "https://b/custom")


def test_one_setting_switches_it_on_in_the_listener_and_the_collector() -> None:
    import argparse

    from sparkwatch.cli.collector import register
    from sparkwatch.collector.config import SETTINGS, load_collector_settings
    from sparkwatch.settings import load_listener_settings

    assert load_listener_settings({}, {}).otlp is False
    assert load_listener_settings({"SPARKWATCH_OTLP": "on"}, {}).otlp is True
    assert load_listener_settings({}, {"spark.sparkwatch.otlp": "true"}).otlp is True
    assert load_listener_settings({}, {}, otlp="off").otlp is False

    def collector(env: dict[str, str], *argv: str) -> bool:
        parser = argparse.ArgumentParser()
        register(parser.add_subparsers())
        args = parser.parse_args(["collector", "--no-auth", *argv])
        flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
        return load_collector_settings(env, flags).otlp

    assert collector({}) is False
    assert collector({}, "--otlp") is True
    assert collector({"SPARKWATCH_COLLECTOR_OTLP": "true"}) is True
    assert collector({"SPARKWATCH_COLLECTOR_OTLP": "true"}, "--no-otlp") is False


@pytest.mark.parametrize(("env", "names"), [
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL='http/json'"),
    ({"OTEL_METRIC_EXPORT_INTERVAL": "0"}, "OTEL_METRIC_EXPORT_INTERVAL='0'"),
    ({"OTEL_METRIC_EXPORT_TIMEOUT": "soon"}, "OTEL_METRIC_EXPORT_TIMEOUT='soon'"),
])
def test_a_bad_variable_is_refused_naming_it(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        otlp_config(env)


@pytest.mark.parametrize(("env", "name", "secret"), [
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://u:{CANARY_PASSWORD}@[bad"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", CANARY_PASSWORD),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT", "4318"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
      "OTEL_EXPORTER_OTLP_ENDPOINT": f"ftp://{CANARY_TOKEN}:4317"},
     "OTEL_EXPORTER_OTLP_ENDPOINT", CANARY_TOKEN),
    ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": f"http://otel:99999/v1/metrics?t={CANARY_TOKEN}"},
     "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", CANARY_TOKEN),
    ({"OTEL_EXPORTER_OTLP_HEADERS": f"authorization:{CANARY_TOKEN}"},
     "OTEL_EXPORTER_OTLP_HEADERS", CANARY_TOKEN),
    ({"OTEL_EXPORTER_OTLP_METRICS_HEADERS": f"Authorization=Bearer%20X,bad header={CANARY_TOKEN}"},
     "OTEL_EXPORTER_OTLP_METRICS_HEADERS", CANARY_TOKEN),
    ({"OTEL_EXPORTER_OTLP_HEADERS": f'authorization="{CANARY_TOKEN}"'},
     "OTEL_EXPORTER_OTLP_HEADERS", CANARY_TOKEN),
], ids=["unparseable", "no-scheme", "ftp", "port-99999", "colon-header", "bad-header-name",
        "quoted-header-value"])
def test_a_bad_endpoint_or_header_is_refused_naming_it_never_showing_it(
    env: dict[str, str], name: str, secret: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        otlp_config(env)
    assert str(refused.value).startswith(f"{name}: ")
    assert secret not in str(refused.value)


@pytest.mark.parametrize(("name", "value"), [
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "nan"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "-1"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "abc"),
    ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "0"),
    ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "1e9"),  # seconds: 31 years
    ("OTEL_METRIC_EXPORT_TIMEOUT", "inf"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "0.0001"),  # 250 exports a second
    ("OTEL_METRIC_EXPORT_INTERVAL", "99"),
    ("OTEL_METRIC_EXPORT_INTERVAL", "1e308"),  # never
])
def test_a_timeout_or_interval_out_of_bounds_is_refused_naming_it(name: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"^{name}='{re.escape(value)}': expected a number"):
        otlp_config({name: value})


def test_bounds_and_well_formed_headers_are_accepted() -> None:
    config = otlp_config({
        "OTEL_METRIC_EXPORT_INTERVAL": "100", "OTEL_METRIC_EXPORT_TIMEOUT": "3600000",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2.5", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "3600",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20T1 , x-tenant = a b",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "https://u:p%40ss@[::1]:4318/otlp"})
    assert (config.interval_seconds, config.timeout_seconds, config.request_timeout_seconds) == (
        0.1, 3600.0, 3600.0)  # the signal's own timeout wins
    assert config.endpoint == "https://u:p%40ss@[::1]:4318/otlp/v1/metrics"
    assert {"Bearer%20T1", "Bearer T1", "p%40ss", "p@ss"} <= set(config.secrets)
    assert "a b" not in config.secrets  # too short to be a secret: masking it would garble lines


def test_the_sdk_s_own_log_lines_show_no_password_query_or_header_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The SDK's exporter logs the URL it failed on, its header parser a bad entry whole: both
    reach the app's handlers redacted (a header parsed by the SDK itself, later, too)."""
    from opentelemetry.util.re import parse_env_headers

    state = MetricState()
    state.apply_all(run_events(fixture(JOIN)))
    collector = SparkwatchCollector(state, selection=profiles.select("default"))
    port = free_port()  # nothing listens there
    config = otlp_config({
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT":
            f"http://otuser:{CANARY_PASSWORD}@127.0.0.1:{port}/v1/metrics?token={CANARY_TOKEN}",
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{CANARY_TOKEN}-h",
        # Long enough for one retry: the SDK logs the URL when it retries.
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2.5", "OTEL_METRIC_EXPORT_INTERVAL": "3600000"})
    caplog.set_level(logging.WARNING)
    export = OtlpExport(config, collector.collect, {}).start()
    try:
        assert export.export_now() is False
        parse_env_headers(f"authorization:Bearer {CANARY_TOKEN}-h", liberal=True)
    finally:
        export.stop(timeout=2)
    sdk = [r for r in caplog.records if r.name.startswith("opentelemetry")]
    shown = caplog.text + "".join(r.getMessage() for r in sdk)
    assert CANARY_PASSWORD not in shown and CANARY_TOKEN not in shown, shown
    said = [r.getMessage() for r in sdk]
    assert any(m.startswith("Transient error") and "url: /v1/metrics?***" in m for m in said), said
    assert any(m.startswith("Header format invalid!") and m.endswith("authorization:***")
               for m in said), said


def test_units_are_ucum_derived_from_the_catalogue_names() -> None:
    assert unit_of(cat.STATE_MEMORY) == "By"
    assert unit_of(cat.QUERY_BATCH_DURATION) == "s"
    assert unit_of(cat.STATE_UPDATE_TIME) == "s"  # a counter of seconds
    assert unit_of(cat.QUERY_WATERMARK) == "s"
    assert unit_of(cat.QUERY_INPUT_RATE) == "1/s"
    assert unit_of(cat.STATE_ROWS) == "1"
    assert unit_of(cat.QUERY_INFO) == "1"
    rocksdb_bytes = [m for m in cat.ALL if m.name.endswith("_bytes_total")]
    assert rocksdb_bytes and {unit_of(m) for m in rocksdb_bytes} == {"By"}
    assert {unit_of(m) for m in cat.ALL} == {"s", "By", "1/s", "1"}


def test_the_attach_line_names_the_export_without_its_secrets() -> None:
    from sparkwatch.listener.announce import Destinations, attach_line

    config = otlp_config({"OTEL_EXPORTER_OTLP_ENDPOINT": "https://bob:s3cret@otel:4318"})
    export = OtlpExport(config, lambda: [], {})  # built, never started
    line = attach_line(Destinations("app-1", "jvm", "0.1.0", None, None, None, None,
                                    export.destination))
    assert line.endswith("push off, otlp https://bob:***@otel:4318/v1/metrics (http/protobuf)")
    assert "s3cret" not in line


def test_a_cumulative_series_keeps_its_start_until_its_value_goes_down() -> None:
    state = MetricState()
    collector = SparkwatchCollector(state, selection=profiles.select("full"))
    converter = Converter(start_ns=1_000)
    data = fixture(JOIN)
    events = run_events(data)
    state.apply_all(events[:3])

    def batches_point(now: int) -> Any:
        metrics = {m.name: m for m in converter.metrics(collector.collect(), now)}
        points: list[Any] = list(metrics[cat.QUERY_BATCHES.name].data.data_points)
        assert len(points) == 1, points
        return points[0]

    first = batches_point(2_000)
    assert (first.start_time_unix_nano, first.value) == (1_000, 2)
    state.apply_all(events[3:])
    later = batches_point(3_000)
    assert (later.start_time_unix_nano, later.value) == (1_000, len(data["progress"]))
    # The query is evicted and seen again: its counter starts over, after the last collection.
    fresh = MetricState()
    collector = SparkwatchCollector(fresh, selection=profiles.select("full"))
    fresh.apply_all(events[:2])
    restarted = batches_point(4_000)
    assert (restarted.start_time_unix_nano, restarted.value) == (3_000, 1)


# --- the bridge against a real receiver -------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_the_receiver_gets_the_catalogue_with_the_progress_values(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20otlp-s3cret")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging,team=data")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "orders-pipeline")
    data = fixture(JOIN)
    state = MetricState()
    state.apply_all(run_events(data))
    collector = SparkwatchCollector(state, selection=profiles.select("full"))
    with receiving(protocol) as (url, received):
        export = start_export(config_for(url, protocol), collector.collect,
                              {"service.name": "unused: OTEL_SERVICE_NAME wins"})
        try:
            received.wait(lambda: received.count() >= 1)
        finally:
            export.stop()
        points = received.last_points()
        headers = received.last_headers()
    assert headers["authorization"] == "Bearer otlp-s3cret"
    progress = data["progress"]
    query = {"app_name": APP.name, "app_id": APP.id, "query_id": data["started"]["id"],
             "query_name": data["started"]["name"]}

    def find(metric: cat.MetricDef, **attrs: Any) -> Point:
        return one([p for p in points if p.name == metric.name
                    and p.attributes == {**query, **attrs}])

    rows = find(cat.QUERY_INPUT_ROWS)
    assert (rows.kind, rows.monotonic, rows.temporality, rows.unit) == ("sum", True, 2, "1")
    assert rows.value == sum(p["numInputRows"] for p in progress)
    assert find(cat.QUERY_BATCHES).value == len(progress)
    op = progress[-1]["stateOperators"][0]
    operator = {"operator": op["operatorName"], "operator_index": "0"}
    state_rows = find(cat.STATE_ROWS, **operator)
    assert (state_rows.kind, state_rows.value) == ("gauge", op["numRowsTotal"])
    memory = find(cat.STATE_MEMORY, **operator)
    assert (memory.value, memory.unit) == (op["memoryUsedBytes"], "By")
    updated = find(cat.STATE_ROWS_UPDATED, **operator)
    assert updated.value == sum(p["stateOperators"][0]["numRowsUpdated"] for p in progress)
    commit = find(cat.STATE_COMMIT_TIME, **operator)
    assert commit.unit == "s" and commit.value == pytest.approx(
        sum(p["stateOperators"][0]["commitTimeMs"] for p in progress) / 1000)
    batch = find(cat.QUERY_BATCH_DURATION)
    assert (batch.kind, batch.unit, batch.temporality) == ("histogram", "s", 2)
    assert batch.count == len(progress) == sum(batch.bucket_counts)
    assert batch.sum == pytest.approx(sum(p["batchDuration"] for p in progress) / 1000)
    assert batch.bounds == cat.BATCH_DURATION_BUCKETS
    assert len(batch.bucket_counts) == len(cat.BATCH_DURATION_BUCKETS) + 1
    info = find(cat.QUERY_INFO, run_id=data["started"]["runId"])
    assert (info.kind, info.value) == ("gauge", 1)
    phases = [p for p in points if p.name == cat.QUERY_PHASE_DURATION.name]
    assert {p.attributes["phase"] for p in phases} == set(progress[-1]["durationMs"])
    assert {p.scope for p in points} == {"sparkwatch"}
    resource = points[0].resource
    assert resource["service.name"] == "orders-pipeline"
    assert (resource["deployment.environment"], resource["team"]) == ("staging", "data")


def exported_points(collector: SparkwatchCollector) -> list[Point]:
    """What one export of ``collector`` over http/protobuf brings a real receiver."""
    with receiving("http/protobuf") as (url, received):
        export = start_export(config_for(url, "http/protobuf"), collector.collect, {})
        try:
            received.wait(lambda: received.count() >= 1)
        finally:
            export.stop()
        return received.last_points()


def test_a_counter_past_64_bits_saturates_and_every_apps_export_goes_on() -> None:
    """Two batches of 2**63 - 1 input rows (each accepted) sum past 64 bits: the point is sent
    at the largest int64, where it failed the encoding of the whole request, every app's."""
    import copy

    from sparkwatch.model.contract import INT64_MAX

    data = copy.deepcopy(fixture(JOIN))
    for p in data["progress"][:2]:
        p["numInputRows"] = INT64_MAX
    state = MetricState()
    state.apply_all(run_events(data))
    other = copy.deepcopy(fixture(JOIN))
    other["started"]["id"] = other["idle"]["id"] = "other-query"
    for p in other["progress"]:
        p["id"] = "other-query"
    state.apply_all(run_events(other))
    collector = SparkwatchCollector(state, selection=profiles.select("full"))
    points = exported_points(collector)
    rows = {p.attributes["query_id"]: p.value for p in points
            if p.name == cat.QUERY_INPUT_ROWS.name}
    assert rows == {data["started"]["id"]: INT64_MAX,
                    "other-query": sum(p["numInputRows"] for p in other["progress"])}


def test_the_metric_profile_decides_what_is_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    state = MetricState()
    state.apply_all(run_events(fixture(JOIN)))
    selection = profiles.select("default", deny=["spark_streaming_state_memory_used_bytes"])
    collector = SparkwatchCollector(state, selection=selection)
    names = {p.name for p in exported_points(collector)}
    assert names <= selection.names
    assert cat.STATE_ROWS.name in names and cat.QUERY_BATCH_DURATION.name in names
    assert cat.STATE_MEMORY.name not in names  # denied
    assert cat.STATE_LAST_ROWS_UPDATED.name not in names  # full profile only


def test_a_state_past_the_receivers_4_mib_limit_still_gets_through_over_grpc() -> None:
    """A gRPC server takes 4 MiB a message by default (the OpenTelemetry Collector's receiver
    too): one request of the whole state was refused (RESOURCE_EXHAUSTED) at every export."""
    from prometheus_client.core import GaugeMetricFamily

    labels = ["app_name", "app_id", "query_id", "query_name", "operator", "operator_index"]
    rows = GaugeMetricFamily(cat.STATE_ROWS.name, "rows", labels=labels)
    series = 20_000  # ~300 bytes each: about 6 MB in one request
    for i in range(series):
        rows.add_metric(["orders-etl-" + "x" * 40, f"app-{i:036d}", f"{i:036d}",
                         "q" * 40, "stateStoreSave", "0"], i)
    with receiving("grpc") as (url, received):
        export = OtlpExport(config_for(url, "grpc", 3_600_000), lambda: [rows], {}).start()
        try:
            assert export.export_now() is True
            with received.lock:
                requests = [request for _, request in received.requests]
        finally:
            export.stop(timeout=5)
    assert len(requests) > 1  # split: each request a bounded number of points
    values = sorted(p.value for request in requests for p in flatten(request))
    assert values == list(range(series))  # every series, once
    assert max(request.ByteSize() for request in requests) < 4 * 1024 * 1024


def test_stop_sends_a_final_export_of_what_arrived_since_the_last_one() -> None:
    data = fixture(JOIN)
    events = run_events(data)
    state = MetricState()
    collector = SparkwatchCollector(state, selection=profiles.select("full"))
    with receiving("http/protobuf") as (url, received):
        # An hour's interval: only the final export at stop can carry the events.
        export = start_export(config_for(url, "http/protobuf", 3_600_000), collector.collect, {})
        state.apply_all(events)
        export.stop()
        assert received.count() == 1
        batches = [p for p in received.last_points() if p.name == cat.QUERY_BATCHES.name]
    assert one(batches).value == len(data["progress"])


def test_a_down_endpoint_never_blocks_is_counted_and_said_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # seconds, as the Python SDK reads it
    state = MetricState()
    state.apply_all(run_events(fixture(JOIN)))
    collector = SparkwatchCollector(state, selection=profiles.select("default"))
    results: list[bool] = []
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    caplog.set_level(logging.WARNING)
    export = OtlpExport(config_for(nobody, "http/protobuf", 3_600_000), collector.collect, {},
                        results.append).start()
    try:
        for _ in range(3):
            started = time.monotonic()
            assert export.export_now() is False
            assert time.monotonic() - started < 5  # bounded by the exporter's timeout
    finally:
        started = time.monotonic()
        export.stop(timeout=2)
        assert time.monotonic() - started < 5
    assert results[:3] == [False, False, False] and export.failures >= 3
    ours = [r for r in caplog.records if r.name == "sparkwatch.otlp.export"]
    assert len(ours) == 1 and "failed" in ours[0].getMessage() and nobody in ours[0].getMessage()
    sdk = [r for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
    assert len(sdk) <= 1, [r.getMessage() for r in sdk]


class _Answers(QuietHandler):
    status = 404

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.answer(self.status, b"{}")


@contextmanager
def answering(status: int) -> Iterator[str]:
    """An endpoint that answers every export with ``status``."""
    handler = type("Answers", (_Answers,), {"status": status})
    with served(handler) as url:
        yield url


@pytest.mark.parametrize(("status", "reason"), [
    (404, "code: 404, reason: Not Found"),
    (429, "Transient error Too Many Requests"),
])
def test_a_failed_export_says_why_in_the_endpoints_words(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, status: int, reason: str,
) -> None:
    """Every failure was worded "the endpoint refused it": a timeout, a refused connection and
    a 429 alike; the SDK's exporter returns only FAILURE and logs its reason."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")  # room for the 429's first retry
    state = MetricState()
    state.apply_all(run_events(fixture(JOIN)))
    caplog.set_level(logging.WARNING)
    with answering(status) as url:
        export = OtlpExport(config_for(url, "http/protobuf", 3_600_000),
                            SparkwatchCollector(state).collect, {}).start()
        try:
            assert export.export_now() is False
        finally:
            export.stop(timeout=2)
    [ours] = [r.getMessage() for r in caplog.records if r.name == "sparkwatch.otlp.export"]
    assert f"failed (Failed to export metrics batch {reason}" in ours or \
        f"failed ({reason}" in ours, ours
    assert "refused" not in ours


def test_an_export_that_works_again_is_said_and_failures_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    state = MetricState()
    state.apply_all(run_events(fixture(JOIN)))
    collector = SparkwatchCollector(state)
    with receiving("grpc") as (url, received):
        export = OtlpExport(config_for(url, "grpc", 3_600_000), collector.collect, {}).start()
        try:
            assert export.export_now() is True
            assert received.count() == 1
        finally:
            export.stop()
    assert (export.exports, export.failures) == (2, 0)  # one asked for, the final one


# --- the listener: importable without the extra, and attached to real Spark -------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_listener_never_imports_opentelemetry_until_otlp_is_switched_on() -> None:
    result = _python(
        "import sys, sparkwatch, sparkwatch.listener.attach, sparkwatch.cli.main\n"
        "import sparkwatch.collector.service\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('opentelemetry', 'grpc')))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_without_the_extra_the_error_names_it() -> None:
    result = _python(
        "import sys\n"
        "# As if the otlp extra were not installed (FastAPI brings opentelemetry-api itself).\n"
        "sys.modules['opentelemetry.sdk'] = sys.modules['opentelemetry.exporter'] = None\n"
        "import sparkwatch.listener.attach\n"
        "from sparkwatch.otlp.config import OtlpConfig\n"
        "from sparkwatch.otlp.export import OtlpUnavailable, start_export\n"
        "try:\n"
        "    start_export(OtlpConfig(), lambda: [], {})\n"
        "except OtlpUnavailable as exc:\n"
        "    print(exc)\n")
    assert result.returncode == 0, result.stderr
    assert "pip install 'sparkwatch[otlp]'" in result.stdout
    assert "OTLP export is switched on" in result.stdout


def test_a_listener_without_the_extra_runs_on_and_counts_the_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from prometheus_client import CollectorRegistry

    from sparkwatch.listener.attach import Attachment, _otlp_export
    from sparkwatch.settings import load_listener_settings

    for name in list(sys.modules):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    settings = load_listener_settings({"SPARKWATCH_OTLP": "on"}, {})
    att = Attachment(settings, APP, CollectorRegistry(auto_describe=False))
    collector = SparkwatchCollector(att.state, lambda: [att.stats()])
    assert _otlp_export(att, collector, {}) is None
    assert att.stats().errors == {"otlp": 1}
    said = [r.getMessage() for r in caplog.records if r.name == "sparkwatch.listener.attach"]
    assert said == ["sparkwatch: OTLP export is switched on but the OpenTelemetry SDK is not "
                    "installed (no module opentelemetry.sdk.metrics): pip install "
                    "'sparkwatch[otlp]'; running without OTLP export"]


@pytest.mark.spark
def test_the_listener_exports_canned_progress_and_its_own_counters(
    spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sparkwatch
    from sparkwatch.model.events import EventKind

    data = fixture(JOIN)
    with receiving("http/protobuf") as (url, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-scope-orgid=tenant-7")
        att = sparkwatch.attach(spark, metrics_port=0, history_url="off", otlp="on",
                                metrics_profile="full")
        try:
            assert att.otlp is not None
            # Real progress JSON through the listener's own intake, as Spark's callback hands it.
            for progress in data["progress"]:
                att.intake.offer(EventKind.PROGRESS, json.dumps(progress))  # type: ignore[union-attr]
            assert att.flush(10)
            want = sum(p["numInputRows"] for p in data["progress"])
            received.wait(lambda: [p.value for p in received.latest(
                cat.QUERY_INPUT_ROWS.name, query_id=data["started"]["id"])] == [want])
        finally:
            att.detach()
        assert received.last_headers()["x-scope-orgid"] == "tenant-7"
        app_id = spark.sparkContext.applicationId
        rows = one(received.latest(cat.QUERY_INPUT_ROWS.name, query_id=data["started"]["id"]))
        assert (rows.attributes["app_id"], rows.attributes["app_name"]) == (
            app_id, spark.conf.get("spark.app.name"))
        assert rows.resource["service.name"] == spark.conf.get("spark.app.name")
        # The listener's own series: what /metrics shows of it, the final export too.
        got = one(received.latest(cat.LISTENER_EVENTS_RECEIVED.name, event="progress"))
        assert got.value == len(data["progress"])
    assert f"otlp {url}/v1/metrics (http/protobuf)" in capsys.readouterr().err


@pytest.mark.spark
def test_a_listener_whose_receiver_is_down_serves_metrics_and_counts_the_failures(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sparkwatch
    from sparkwatch.model.events import EventKind

    data = fixture(JOIN)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "100")
    att = sparkwatch.attach(spark, metrics_port=0, history_url="off", otlp=True)
    try:
        started = time.monotonic()
        for progress in data["progress"]:
            att.intake.offer(EventKind.PROGRESS, json.dumps(progress))  # type: ignore[union-attr]
        assert att.flush(10) and time.monotonic() - started < 5
        query = att.state.query(att.app.id, data["started"]["id"])
        assert query is not None and query.batches == len(data["progress"])
        wait_for(lambda: att.stats().delivery_failures.get("otlp", 0) >= 2, 30,
                 "two failed OTLP exports counted")
        assert "otlp" in att.stats().workers  # its heartbeat series, as every worker's
        text = generate_latest(att.registry).decode()
        assert 'spark_streaming_listener_delivery_failures_total{app_id="' in text
        assert 'sink="otlp"}' in text
    finally:
        started = time.monotonic()
        att.detach()
        assert time.monotonic() - started < 10


@pytest.mark.spark
def test_a_real_query_s_batches_reach_the_receiver_over_grpc(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sparkwatch
    from tests.test_counters_exact import run_available
    from tests.workloads import progress_dicts, write_batches

    with receiving("grpc") as (url, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
        att = sparkwatch.attach(spark, metrics_port=0, history_url="off", otlp=True)
        try:
            write_batches(tmp_path / "in", batches=1, rows=10)
            query = run_available(spark, tmp_path / "in", tmp_path / "ckpt")
            qid = str(query.id)
            assert att.flush(10)
            wait_for(lambda: not att.state.query(att.app.id, qid).active, 30, "the run to end")
        finally:
            att.detach()  # the final export: the only one within an hour's interval
        batches = progress_dicts(query)
        updated = one(received.latest(cat.STATE_ROWS_UPDATED.name, query_id=qid))
        assert updated.value == sum(b["stateOperators"][0]["numRowsUpdated"] for b in batches)
        assert updated.attributes["operator_index"] == "0"
        inputs = one(received.latest(cat.QUERY_INPUT_ROWS.name, query_id=qid))
        assert inputs.value == sum(b["numInputRows"] for b in batches) == 10
        active = one(received.latest(cat.QUERY_ACTIVE.name, query_id=qid))
        assert active.value == 0
