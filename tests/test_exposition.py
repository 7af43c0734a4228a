"""Real fixtures folded into MetricState and scraped through SparkwatchCollector.

Exported values are compared with the progress JSON they came from; counters must be exact.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sparkwatch.metrics.custom import KNOWN, MS
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.stats import ListenerStats
from sparkwatch.model.events import AppInfo, Envelope, EventKind, ParsedEvent
from sparkwatch.model.parse import parse_envelope
from tests.conftest import FIXTURES
from tests.support import SettableClock

FIXTURE_FILES = sorted(FIXTURES.glob("spark-*/*.json"))
APP = AppInfo(name="capture", id="local-1", spark_version="4.3.0")
GRACE = 300.0


def fixture(relative: str) -> dict[str, Any]:
    return json.loads((FIXTURES / relative).read_text())


def event(kind: EventKind, payload: dict[str, Any], app: AppInfo = APP) -> ParsedEvent:
    return parse_envelope(Envelope(kind=kind, app=app, received_at=0.0, payload=payload))


def progress_events(data: dict[str, Any]) -> list[ParsedEvent]:
    return [event(EventKind.PROGRESS, p) for p in data["progress"]]


def run_events(
    data: dict[str, Any], terminated: bool = False, app: AppInfo = APP
) -> list[ParsedEvent]:
    """Started, every progress and idle, in the order Spark sent them; terminated if asked."""
    events = [event(EventKind.STARTED, data["started"], app)]
    events += [event(EventKind.PROGRESS, p, app) for p in data["progress"]]
    events.append(event(EventKind.IDLE, data["idle"], app))
    if terminated:
        events.append(event(EventKind.TERMINATED, data["terminated"], app))
    return events


class Scraper:
    """A MetricState with its collector on a private registry."""

    def __init__(
        self, clock: SettableClock | None = None, listener_stats: list[ListenerStats] | None = None
    ) -> None:
        self.clock = clock or SettableClock()
        self.state = MetricState(terminated_grace_seconds=GRACE, clock=self.clock)
        self.registry = CollectorRegistry(auto_describe=True)
        stats = None if listener_stats is None else (lambda: listener_stats)
        self.registry.register(SparkwatchCollector(self.state, stats))

    @classmethod
    def of(cls, events: Iterable[ParsedEvent]) -> Scraper:
        """A scraper whose state has applied ``events``."""
        scraper = cls()
        scraper.apply(events)
        return scraper

    def apply(self, events: Iterable[ParsedEvent]) -> list[bool]:
        return [self.state.apply(e) for e in events]

    def value(self, name: str, labels: dict[str, str]) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def text(self) -> str:
        return generate_latest(self.registry).decode()


def query_labels(data: dict[str, Any], app: AppInfo = APP) -> dict[str, str]:
    return {
        "app_name": app.name,
        "app_id": app.id,
        "query_id": data["started"]["id"],
        "query_name": data["query"],
    }


def operator_labels(data: dict[str, Any], index: int, name: str) -> dict[str, str]:
    return {**query_labels(data), "operator": name, "operator_index": str(index)}


def operators(progress: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return list(enumerate(progress["stateOperators"]))


def last_operators(data: dict[str, Any]) -> Iterator[tuple[int, dict[str, Any], dict[str, str]]]:
    """Each operator of the last progress: its index, its entry and its metric labels."""
    for index, op in operators(data["progress"][-1]):
        yield index, op, operator_labels(data, index, op["operatorName"])


def op_sum(data: dict[str, Any], index: int, key: str, batches: slice = slice(None)) -> int:
    return sum(p["stateOperators"][index][key] for p in data["progress"][batches])


def custom_sum(data: dict[str, Any], index: int, key: str) -> int:
    return sum(p["stateOperators"][index]["customMetrics"][key] for p in data["progress"])


@pytest.fixture(params=FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def sample(request: pytest.FixtureRequest) -> dict[str, Any]:
    return json.loads(request.param.read_text())


def test_state_gauges_equal_the_last_progress(sample: dict[str, Any]) -> None:
    scraper = Scraper.of(run_events(sample))
    for _, op, labels in last_operators(sample):
        expected = {
            "spark_streaming_state_rows": op["numRowsTotal"],
            "spark_streaming_state_memory_used_bytes": op["memoryUsedBytes"],
            "spark_streaming_state_last_batch_rows_updated": op["numRowsUpdated"],
            "spark_streaming_state_last_batch_rows_removed": op["numRowsRemoved"],
            "spark_streaming_state_last_batch_rows_dropped_by_watermark": op[
                "numRowsDroppedByWatermark"
            ],
            "spark_streaming_state_last_batch_commit_time_seconds": op["commitTimeMs"] / 1000,
            "spark_streaming_state_shuffle_partitions": op["numShufflePartitions"],
            "spark_streaming_state_store_instances": op["numStateStoreInstances"],
        }
        assert {name: scraper.value(name, labels) for name in expected} == expected


def test_counters_equal_sums_over_all_batches(sample: dict[str, Any]) -> None:
    scraper = Scraper.of(run_events(sample))
    q = query_labels(sample)
    progress = sample["progress"]
    assert scraper.value("spark_streaming_query_batches_total", q) == len(progress)
    assert scraper.value("spark_streaming_query_input_rows_total", q) == sum(
        p["numInputRows"] for p in progress
    )
    for index, op in operators(progress[-1]):
        labels = operator_labels(sample, index, op["operatorName"])
        for metric, key in (
            ("spark_streaming_state_rows_updated_total", "numRowsUpdated"),
            ("spark_streaming_state_rows_removed_total", "numRowsRemoved"),
            ("spark_streaming_state_rows_dropped_by_watermark_total", "numRowsDroppedByWatermark"),
        ):
            assert scraper.value(metric, labels) == op_sum(sample, index, key), metric
        assert scraper.value("spark_streaming_state_commit_time_seconds_total", labels) == (
            pytest.approx(op_sum(sample, index, "commitTimeMs") / 1000)
        )


def test_several_batches_between_two_scrapes_are_counted_exactly() -> None:
    data = fixture("spark-4.3.0/chained_hdfs.json")
    scraper = Scraper()
    events = progress_events(data)
    scraper.apply(events[:1])
    labels = [
        operator_labels(data, i, op["operatorName"]) for i, op in operators(data["progress"][0])
    ]
    before = [scraper.value("spark_streaming_state_rows_updated_total", lab) for lab in labels]
    removed_before = [
        scraper.value("spark_streaming_state_rows_removed_total", lab) for lab in labels
    ]
    scraper.apply(events[1:])
    for i, lab in enumerate(labels):
        updated = scraper.value("spark_streaming_state_rows_updated_total", lab)
        removed = scraper.value("spark_streaming_state_rows_removed_total", lab)
        assert updated - before[i] == op_sum(data, i, "numRowsUpdated", slice(1, None))  # type: ignore[operator]
        assert removed - removed_before[i] == op_sum(data, i, "numRowsRemoved", slice(1, None))  # type: ignore[operator]
    # The real numbers, so a fixture regression cannot make this vacuous.
    assert op_sum(data, 0, "numRowsUpdated", slice(1, None)) == 7
    assert op_sum(data, 1, "numRowsRemoved", slice(1, None)) == 12


def test_redelivered_progress_is_not_counted_twice() -> None:
    data = fixture("spark-4.3.0/dedupe_rocksdb.json")
    scraper = Scraper()
    assert all(scraper.apply(progress_events(data)))
    first = scraper.text()
    assert not any(scraper.apply(progress_events(data)))
    assert not any(scraper.apply(progress_events(data)[:2]))
    assert scraper.text() == first
    labels = operator_labels(data, 0, "dedupe")
    assert scraper.value("spark_streaming_state_rows_updated_total", labels) == op_sum(
        data, 0, "numRowsUpdated"
    )


def restarted(data: dict[str, Any], run_id: str) -> list[dict[str, Any]]:
    """The same batches as a new run from the same checkpoint: Spark re-runs the last batch id."""
    last = data["progress"][-1]["batchId"]
    out = []
    for p in copy.deepcopy(data["progress"]):
        p["runId"] = run_id
        p["batchId"] += last
        out.append(p)
    return out


def test_restarted_query_keeps_counters_monotonic() -> None:
    data = fixture("spark-4.3.0/window_agg_hdfs.json")
    scraper = Scraper.of(run_events(data, terminated=True))
    q = query_labels(data)
    op = operator_labels(data, 0, "stateStoreSave")
    first_updated = scraper.value("spark_streaming_state_rows_updated_total", op)
    second_run = restarted(data, "00000000-0000-4000-8000-000000000002")
    started = {**data["started"], "runId": second_run[0]["runId"]}
    scraper.apply([event(EventKind.STARTED, started)])
    scraper.apply(event(EventKind.PROGRESS, p) for p in second_run)
    assert scraper.value("spark_streaming_state_rows_updated_total", op) == 2 * first_updated  # type: ignore[operator]
    assert scraper.value("spark_streaming_query_batches_total", q) == 2 * len(data["progress"])
    assert scraper.value("spark_streaming_query_runs_total", q) == 2
    assert scraper.value("spark_streaming_query_active", q) == 1
    assert scraper.value("spark_streaming_query_info", {**q, "run_id": started["runId"]}) == 1
    assert (
        scraper.value("spark_streaming_query_info", {**q, "run_id": data["started"]["runId"]})
        is None
    )


def test_late_redelivery_from_the_previous_run_is_not_counted_again() -> None:
    # A retried push can land after the restarted run's first progress.
    data = fixture("spark-4.3.0/dedupe_hdfs.json")
    scraper = Scraper.of(progress_events(data))
    second_run = restarted(data, "00000000-0000-4000-8000-000000000002")
    scraper.apply([event(EventKind.PROGRESS, second_run[0])])
    text = scraper.text()
    assert scraper.apply(progress_events(data)[-2:]) == [False, False]
    assert scraper.text() == text
    q = query_labels(data)
    assert scraper.value("spark_streaming_query_runs_total", q) == 2
    assert scraper.value("spark_streaming_query_info", {**q, "run_id": second_run[0]["runId"]}) == 1


def test_terminated_query_is_evicted_after_the_grace_period() -> None:
    data = fixture("spark-4.3.0/limit_hdfs.json")
    clock = SettableClock()
    scraper = Scraper(clock)
    scraper.apply(run_events(data, terminated=True))
    q = query_labels(data)
    clock.now += GRACE - 1
    assert scraper.value("spark_streaming_query_active", q) == 0
    assert scraper.value("spark_streaming_query_failed", q) == 0
    assert scraper.value("spark_streaming_state_rows", operator_labels(data, 0, "globalLimit")) == 1
    clock.now += 1
    assert scraper.value("spark_streaming_query_active", q) is None
    assert "spark_streaming_state_rows{" not in scraper.text()
    assert "spark_streaming_app_info{" not in scraper.text()


def test_idle_event_sets_idle_and_last_event_time() -> None:
    data = fixture("spark-4.3.0/session_window_rocksdb.json")
    scraper = Scraper.of(run_events(data))
    q = query_labels(data)
    assert scraper.value("spark_streaming_query_idle", q) == 1
    idle_at = event(EventKind.IDLE, data["idle"]).event.timestamp  # type: ignore[union-attr]
    assert scraper.value("spark_streaming_query_last_event_timestamp_seconds", q) == idle_at


def test_rates_fall_to_zero_while_idle_and_come_back_with_the_next_batch() -> None:
    data = fixture("spark-4.3.0/session_window_rocksdb.json")
    scraper = Scraper()
    busy_at = max(i for i, p in enumerate(data["progress"]) if p["inputRowsPerSecond"] > 0)
    scraper.apply(run_events(data)[: busy_at + 2])  # started, the progress up to a busy batch
    q, last = query_labels(data), data["progress"][busy_at]
    busy = scraper.value("spark_streaming_query_input_rows_per_second", q)
    assert busy == last["inputRowsPerSecond"] and busy > 0
    scraper.apply([event(EventKind.IDLE, data["idle"])])
    assert scraper.value("spark_streaming_query_input_rows_per_second", q) == 0
    assert scraper.value("spark_streaming_query_processed_rows_per_second", q) == 0
    assert scraper.value("spark_streaming_query_batch_id", q) == last["batchId"]  # still the last
    scraper.apply([event(EventKind.PROGRESS, {**last, "batchId": last["batchId"] + 1})])
    assert scraper.value("spark_streaming_query_input_rows_per_second", q) == busy


@pytest.mark.parametrize("version", ["spark-3.5.9", "spark-4.3.0"])
def test_known_rocksdb_keys_are_exported_in_base_units(version: str) -> None:
    data = fixture(f"{version}/join_rocksdb.json")
    scraper = Scraper.of(progress_events(data))
    labels = operator_labels(data, 0, "symmetricHashJoin")
    last = data["progress"][-1]["stateOperators"][0]["customMetrics"]
    file_sync = custom_sum(data, 0, "rocksdbCommitFileSyncLatencyMs") * MS
    assert custom_sum(data, 0, "rocksdbCommitFileSyncLatencyMs") > 0
    assert scraper.value(
        "spark_streaming_state_rocksdb_commit_file_sync_seconds_total", labels
    ) == pytest.approx(file_sync)
    assert scraper.value("spark_streaming_state_rocksdb_gets_total", labels) == custom_sum(
        data, 0, "rocksdbGetCount"
    )
    # Levels are the last batch's value, not sums.
    assert (
        scraper.value("spark_streaming_state_rocksdb_sst_file_size_bytes", labels)
        == last["rocksdbSstFileSize"]
    )
    assert (
        scraper.value("spark_streaming_state_rocksdb_pinned_blocks_memory_bytes", labels)
        == last["rocksdbPinnedBlocksMemoryUsage"]
    )


def test_every_known_key_of_a_fixture_gets_its_dedicated_metric(sample: dict[str, Any]) -> None:
    scraper = Scraper.of(progress_events(sample))
    for index, op, labels in last_operators(sample):
        for key, value in op.get("customMetrics", {}).items():
            known = KNOWN.get(key)
            if known is None:
                continue
            expected = custom_sum(sample, index, key) if known.per_batch else value
            assert scraper.value(known.metric.name, labels) == pytest.approx(
                expected * known.scale
            ), key
            assert (
                scraper.value("spark_streaming_state_custom_metric", {**labels, "metric": key})
                is None
            )


def test_unknown_custom_key_goes_through_the_generic_metric() -> None:
    data = fixture("spark-4.3.0/dedupe_hdfs.json")
    raw = copy.deepcopy(data["progress"][-1])
    raw["stateOperators"][0]["customMetrics"]["someKeyFromSpark9"] = 77
    scraper = Scraper.of([event(EventKind.PROGRESS, raw)])
    labels = {**operator_labels(data, 0, "dedupe"), "metric": "someKeyFromSpark9"}
    assert scraper.value("spark_streaming_state_custom_metric", labels) == 77


def test_per_instance_keys_are_aggregated_min_max_reported() -> None:
    data = fixture("spark-4.3.0/join_hdfs.json")
    scraper = Scraper.of(progress_events(data))
    custom = data["progress"][-1]["stateOperators"][0]["customMetrics"]
    snapshots = [v for k, v in custom.items() if k.startswith("SnapshotLastUploaded.partition_")]
    # 8 stores (2 partitions x 4 join stores) but Spark reports only the 5 lowest by default.
    assert (
        len(snapshots) == 5
        and data["progress"][-1]["stateOperators"][0]["numStateStoreInstances"] == 8
    )
    labels = {**operator_labels(data, 0, "symmetricHashJoin"), "metric": "SnapshotLastUploaded"}
    assert scraper.value("spark_streaming_state_instance_metric_min", labels) == min(snapshots)
    assert scraper.value("spark_streaming_state_instance_metric_max", labels) == max(snapshots)
    assert scraper.value("spark_streaming_state_instance_metric_reported", labels) == 5
    assert "partition_" not in scraper.text()


def test_source_backlog_gauges_come_from_kafka_like_metrics() -> None:
    data = fixture("spark-4.3.0/dedupe_hdfs.json")
    raw = copy.deepcopy(data["progress"][-1])
    raw["sources"][0].update(
        description="KafkaV2[Subscribe[events]]",
        metrics={
            "minOffsetsBehindLatest": "26",
            "maxOffsetsBehindLatest": "46",
            "avgOffsetsBehindLatest": "36.0",
            "estimatedTotalBytesBehindLatest": "1024",
            "notANumber": "n/a",
        },
    )
    scraper = Scraper.of([event(EventKind.PROGRESS, raw)])
    labels = {**query_labels(data), "source_index": "0", "source": "KafkaV2[Subscribe[events]]"}
    assert scraper.value("spark_streaming_source_min_offsets_behind_latest", labels) == 26
    assert scraper.value("spark_streaming_source_max_offsets_behind_latest", labels) == 46
    assert scraper.value("spark_streaming_source_avg_offsets_behind_latest", labels) == 36.0
    extra = {**labels, "metric": "estimatedTotalBytesBehindLatest"}
    assert scraper.value("spark_streaming_source_metric", extra) == 1024
    assert (
        scraper.value("spark_streaming_source_metric", {**labels, "metric": "notANumber"}) is None
    )


def test_source_rows_are_counted_per_source_of_a_join() -> None:
    data = fixture("spark-4.3.0/join_hdfs.json")
    scraper = Scraper.of(progress_events(data))
    for index in (0, 1):
        source = data["progress"][-1]["sources"][index]["description"]
        labels = {**query_labels(data), "source_index": str(index), "source": source}
        rows = sum(p["sources"][index]["numInputRows"] for p in data["progress"])
        assert scraper.value("spark_streaming_source_input_rows_total", labels) == rows


def test_v1_sink_reports_no_output_rows_counter() -> None:
    data = fixture("spark-4.3.0/update_agg_hdfs.json")
    assert {p["sink"]["numOutputRows"] for p in data["progress"]} == {-1}
    scraper = Scraper.of(progress_events(data))
    q = query_labels(data)
    assert scraper.value("spark_streaming_sink_output_rows_total", q) is None
    assert scraper.value("spark_streaming_sink_info", {**q, "description": "ForeachBatchSink"}) == 1


def test_watermark_gauges_skip_the_epoch_of_batch_zero() -> None:
    data = fixture("spark-4.3.0/window_agg_hdfs.json")
    scraper = Scraper.of(progress_events(data)[:1])
    q = query_labels(data)
    assert scraper.value("spark_streaming_query_watermark_timestamp_seconds", q) == 0.0
    assert scraper.value("spark_streaming_query_watermark_lag_seconds", q) is None
    scraper.apply(progress_events(data)[1:])
    last = event(EventKind.PROGRESS, data["progress"][-1]).event
    assert scraper.value("spark_streaming_query_watermark_timestamp_seconds", q) == (
        last.event_time.watermark  # type: ignore[union-attr]
    )
    # The last batch is a no-data batch: event-time gauges keep the last batch that had data.
    assert data["progress"][-1]["numInputRows"] == 0
    assert scraper.value("spark_streaming_query_event_time_max_timestamp_seconds", q) == (
        1767225670.0  # 2026-01-01T00:01:10Z, the newest row of round 3
    )


def test_batch_duration_histogram_counts_every_batch(sample: dict[str, Any]) -> None:
    scraper = Scraper.of(progress_events(sample))
    q = query_labels(sample)
    progress = sample["progress"]
    assert scraper.value("spark_streaming_query_batch_duration_seconds_count", q) == len(progress)
    total = sum(p.get("batchDuration", p["durationMs"]["triggerExecution"]) for p in progress)
    assert scraper.value("spark_streaming_query_batch_duration_seconds_sum", q) == pytest.approx(
        total / 1000
    )


def all_fixtures_scraped() -> str:
    """Every fixture as its own app (as a collector serving many apps sees them), plus the
    listener's own families, a terminated query and a Kafka-like source."""
    stats = ListenerStats(
        app=APP,
        mode="jvm",
        version="0.1.0",
        received={"progress": 3, "idle": 1},
        dropped={"intake": 2},
        delivery_failures={"history": 1},
        parse_errors=1,
        queues={"intake": (0, 1000)},
        workers={"intake": 1767225600.25, "push": 1767225599.5},
    )
    scraper = Scraper(listener_stats=[stats])
    for index, path in enumerate(FIXTURE_FILES):
        version = path.parent.name.removeprefix("spark-")
        app = AppInfo(name=f"capture-{version}", id=f"local-{index}", spark_version=version)
        data = json.loads(path.read_text())
        scraper.apply(run_events(data, terminated=index % 2 == 0, app=app))
    kafka = copy.deepcopy(fixture("spark-4.3.0/dedupe_hdfs.json"))
    kafka["progress"][-1]["sources"][0]["metrics"] = {"maxOffsetsBehindLatest": "46"}
    scraper.apply(progress_events(kafka))
    return scraper.text()


def test_promtool_accepts_the_whole_exposition(promtool: str, tmp_path: Path) -> None:
    text = all_fixtures_scraped()
    for family in (
        "state_rows{",
        "state_rocksdb_",
        "listener_events_dropped_total{",
        "listener_worker_last_progress_timestamp_seconds{",
        "source_max_offsets_behind_latest{",
        "query_phase_duration_seconds_bucket{",
    ):
        assert f"spark_streaming_{family}" in text, family
    result = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    (tmp_path / "exposition.txt").write_text(text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
