"""The parser against real Spark JSON (3.5 and 4.3 fixtures) and against what is wrong."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.model.events import AppInfo, EventKind, QueryProgress, StateOperator
from sparkwatch.model.parse import (
    EventParseError,
    envelope_from_json,
    parse_idle,
    parse_payload,
    parse_progress,
    parse_started,
    parse_terminated,
)
from tests.conftest import FIXTURES
from tests.support import SPARK_OPERATOR_NUMBERS

FIXTURE_FILES = sorted(FIXTURES.glob("spark-*/*.json"))
APP = AppInfo(name="tests", id="app-1", spark_version="4.3.0")

# StateOperatorProgress key -> StateOperator attribute: every field Spark sends.
OPERATOR_FIELDS = {
    "operatorName": "name", **SPARK_OPERATOR_NUMBERS, "customMetrics": "custom_metrics",
}


def fixture(relative: str) -> dict[str, Any]:
    return json.loads((FIXTURES / relative).read_text())


def progress_of(relative: str, index: int = -1) -> dict[str, Any]:
    """A deep copy of one real progress object, safe to mutate into a variant."""
    return copy.deepcopy(fixture(relative)["progress"][index])


def all_progress() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.parent.name}/{path.stem}#{p['batchId']}", p)
        for path in FIXTURE_FILES
        for p in json.loads(path.read_text())["progress"]
    ]


def test_fixtures_cover_both_spark_lines_and_every_operator_kind() -> None:
    versions = {path.parent.name for path in FIXTURE_FILES}
    assert {"spark-3.5.9", "spark-4.3.0"} <= versions
    names = {op["operatorName"] for _, p in all_progress() for op in p["stateOperators"]}
    assert {
        "stateStoreSave",
        "dedupe",
        "dedupeWithinWatermark",
        "sessionWindowStateStoreSaveExec",
        "defaultName",
        "symmetricHashJoin",
        "globalLimit",
        "applyInPandasWithState",
        "transformWithStateInPandasExec",
    } <= names


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_fixture_event_parses(path: Path) -> None:
    data = json.loads(path.read_text())
    progress = [parse_progress(p) for p in data["progress"]]
    assert progress, "a fixture holds at least one progress"
    query_id, run_id = progress[0].query_id, progress[0].run_id
    assert all((p.query_id, p.run_id) == (query_id, run_id) for p in progress)
    assert [p.batch_id for p in progress] == sorted({p.batch_id for p in progress})
    started = parse_started(data["started"])
    assert (started.query_id, started.run_id, started.name) == (query_id, run_id, data["query"])
    terminated = parse_terminated(data["terminated"])
    assert (terminated.query_id, terminated.exception, terminated.error_class) == (
        query_id,
        None,
        None,
    )
    idle = parse_idle(data["idle"])
    assert idle.run_id == run_id and idle.timestamp >= started.timestamp


@pytest.mark.parametrize(
    ("label", "raw"), all_progress(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_state_operator_field_lands_with_its_exact_value(label: str, raw: dict) -> None:
    parsed = parse_progress(raw)
    assert len(parsed.state_operators) == len(raw["stateOperators"]) >= 1
    for index, (op, raw_op) in enumerate(
        zip(parsed.state_operators, raw["stateOperators"], strict=True)
    ):
        assert op.index == index
        assert set(raw_op) <= set(OPERATOR_FIELDS), f"{label}: Spark sent a field we do not map"
        for key, attr in OPERATOR_FIELDS.items():
            expected = raw_op.get(key, {} if key == "customMetrics" else None)
            assert getattr(op, attr) == expected, f"{label}: {key}"


@pytest.mark.parametrize(
    ("label", "raw"), all_progress(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_progress_top_level_values_land_exactly(label: str, raw: dict) -> None:
    p = parse_progress(raw)
    assert (p.query_id, p.run_id, p.name, p.batch_id) == (
        raw["id"],
        raw["runId"],
        raw["name"],
        raw["batchId"],
    )
    assert p.num_input_rows == raw["numInputRows"]
    assert p.batch_duration_ms == raw.get("batchDuration", raw["durationMs"]["triggerExecution"])
    assert p.input_rows_per_second == raw.get("inputRowsPerSecond")
    assert p.processed_rows_per_second == raw.get("processedRowsPerSecond")
    assert dict(p.duration_ms) == raw["durationMs"]
    assert [s.num_input_rows for s in p.sources] == [s["numInputRows"] for s in raw["sources"]]
    assert [s.description for s in p.sources] == [s["description"] for s in raw["sources"]]
    assert p.sink is not None and p.sink.num_output_rows == raw["sink"]["numOutputRows"]


def test_spark35_batch_duration_falls_back_to_trigger_execution() -> None:
    raw = fixture("spark-3.5.9/window_agg_hdfs.json")["progress"][0]
    assert "batchDuration" not in raw  # 3.5 does not serialise it
    assert parse_progress(raw).batch_duration_ms == raw["durationMs"]["triggerExecution"] > 0


def test_spark4_batch_duration_and_trigger_execution_measure_the_same_span() -> None:
    # What justifies the 3.5 fallback above.
    gaps = [
        abs(p["batchDuration"] - p["durationMs"]["triggerExecution"])
        for _, p in all_progress()
        if "batchDuration" in p
    ]
    assert len(gaps) > 50 and max(gaps) <= 20


def test_timestamps_become_utc_epoch_seconds() -> None:
    raw = progress_of("spark-4.3.0/window_agg_hdfs.json", 0)
    raw["timestamp"] = "2026-01-01T00:00:01.250Z"
    p = parse_progress(raw)
    assert p.timestamp == 1767225601.25
    assert p.event_time.min == 1767225600.0  # 2026-01-01T00:00:00Z, the first row of the input
    assert p.event_time.max == 1767225613.0
    assert p.event_time.avg == 1767225604.625


def test_unknown_custom_metric_keys_flow_through_untouched() -> None:
    raw = progress_of("spark-4.3.0/join_hdfs.json")
    custom = raw["stateOperators"][0]["customMetrics"]
    custom["someKeyFromSpark9"] = 123456789012
    op = parse_progress(raw).state_operators[0]
    assert op.custom_metrics["someKeyFromSpark9"] == 123456789012
    # Real per-instance keys (4.1+) are kept as Spark spells them; the metrics layer splits them.
    assert (
        op.custom_metrics["SnapshotLastUploaded.partition_1_left-keyWithIndexToValue"]
        == (custom["SnapshotLastUploaded.partition_1_left-keyWithIndexToValue"])
    )
    assert dict(op.custom_metrics) == custom


def test_rates_spark_omits_as_nan_parse_as_none() -> None:
    raw = progress_of("spark-4.3.0/dedupe_hdfs.json", 0)
    for holder in (raw, raw["sources"][0]):
        del holder["inputRowsPerSecond"]
        del holder["processedRowsPerSecond"]
    p = parse_progress(raw)
    assert p.input_rows_per_second is None and p.processed_rows_per_second is None
    assert p.sources[0].input_rows_per_second is None
    assert p.sources[0].processed_rows_per_second is None


@pytest.mark.parametrize("spelled", ["NaN", "Infinity", float("nan"), float("inf")])
def test_non_finite_rates_written_out_parse_as_none(spelled: Any) -> None:
    raw = progress_of("spark-4.3.0/dedupe_hdfs.json", 0)
    raw["inputRowsPerSecond"] = spelled
    assert parse_progress(raw).input_rows_per_second is None


def test_empty_maps_that_spark_omits_parse_as_empty() -> None:
    # A real query without watermark: Spark sends no eventTime, no observedMetrics, no metrics.
    raw = progress_of("spark-4.3.0/update_agg_hdfs.json")
    assert not {"eventTime", "observedMetrics"} & set(raw)
    assert "metrics" not in raw["sources"][0] and "metrics" not in raw["sink"]
    p = parse_progress(raw)
    assert p.event_time.min is p.event_time.max is p.event_time.watermark is None
    assert dict(p.observed_metrics) == {}
    assert dict(p.sources[0].metrics) == {} and dict(p.sink.metrics) == {}  # type: ignore[union-attr]
    del raw["stateOperators"][0]["customMetrics"]
    assert dict(parse_progress(raw).state_operators[0].custom_metrics) == {}


@pytest.mark.parametrize("version", ["spark-3.5.9", "spark-4.3.0"])
def test_batch_zero_reports_the_epoch_as_watermark(version: str) -> None:
    raw = fixture(f"{version}/window_agg_hdfs.json")["progress"][0]
    assert raw["batchId"] == 0 and raw["eventTime"]["watermark"] == "1970-01-01T00:00:00.000Z"
    p = parse_progress(raw)
    assert p.event_time.watermark == 0.0
    assert p.event_time.max == 1767225613.0  # 2026-01-01T00:00:13Z, the newest row of round 1


@pytest.mark.parametrize("version", ["spark-3.5.9", "spark-4.3.0"])
def test_no_data_batch_has_watermark_and_evictions_but_no_event_times(version: str) -> None:
    data = fixture(f"{version}/window_agg_hdfs.json")
    raw = next(p for p in data["progress"] if p["numInputRows"] == 0 and p["batchId"] > 0)
    assert set(raw["eventTime"]) == {"watermark"}
    p = parse_progress(raw)
    assert p.num_input_rows == 0 and p.sources[0].num_input_rows == 0
    assert p.event_time.min is p.event_time.max is p.event_time.avg is None
    assert p.event_time.watermark is not None and p.event_time.watermark > 0
    op = p.state_operators[0]
    assert op.num_rows_updated == 0
    assert op.num_rows_total == raw["stateOperators"][0]["numRowsTotal"]


def test_no_data_batch_evicts_state_rows() -> None:
    # Round 2 moves the watermark to 00:00:25: the no-data batch after it evicts the 5 windows
    # of round 1 (3 keys in [0, 10), 2 in [10, 20)), leaving the 3 windows of [30, 40).
    progress = [parse_progress(p) for p in fixture("spark-4.3.0/window_agg_hdfs.json")["progress"]]
    evicting = [
        p for p in progress if p.num_input_rows == 0 and p.state_operators[0].num_rows_removed
    ]
    assert evicting, "a no-data batch evicted state"
    first = evicting[0].state_operators[0]
    assert (first.num_rows_removed, first.num_rows_total) == (5, 3)


def test_spark35_session_window_reports_default_name() -> None:
    p = parse_progress(fixture("spark-3.5.9/session_window_hdfs.json")["progress"][0])
    assert [op.name for op in p.state_operators] == ["defaultName"]
    p4 = parse_progress(fixture("spark-4.3.0/session_window_hdfs.json")["progress"][0])
    assert [op.name for op in p4.state_operators] == ["sessionWindowStateStoreSaveExec"]


def test_chained_operators_keep_spark_order_and_positions() -> None:
    # dropDuplicates feeds the aggregation, yet Spark lists the aggregation first (it collects
    # state operators top-down from the sink): identity is (position, name), not name alone.
    p = parse_progress(fixture("spark-4.3.0/chained_hdfs.json")["progress"][0])
    assert [(op.index, op.name) for op in p.state_operators] == [
        (0, "stateStoreSave"),
        (1, "dedupe"),
    ]


def kafka_like(raw: dict[str, Any]) -> dict[str, Any]:
    """A real progress whose source reports Kafka's backlog (strings, as Spark sends them)."""
    source = raw["sources"][0]
    source["description"] = "KafkaV2[Subscribe[events]]"
    source["startOffset"] = {"events": {"0": 100, "1": 90}}
    source["endOffset"] = {"events": {"0": 104, "1": 94}}
    source["latestOffset"] = {"events": {"0": 150, "1": 120}}
    source["metrics"] = {
        "avgOffsetsBehindLatest": "36.0",
        "maxOffsetsBehindLatest": "46",
        "minOffsetsBehindLatest": "26",
        "estimatedTotalBytesBehindLatest": "not-a-number",
    }
    return raw


def test_kafka_like_source_metrics_are_strings_readable_as_numbers() -> None:
    src = parse_progress(kafka_like(progress_of("spark-4.3.0/dedupe_hdfs.json"))).sources[0]
    assert src.metrics["maxOffsetsBehindLatest"] == "46"
    assert src.numeric_metric("minOffsetsBehindLatest") == 26.0
    assert src.numeric_metric("avgOffsetsBehindLatest") == 36.0
    assert src.numeric_metric("estimatedTotalBytesBehindLatest") is None
    assert src.numeric_metric("absent") is None
    assert src.latest_offset == {"events": {"0": 150, "1": 120}}


def test_progress_wrapped_as_in_the_progress_event_is_unwrapped() -> None:
    raw = progress_of("spark-4.3.0/dedupe_hdfs.json")
    envelope = envelope_from_json(EventKind.PROGRESS, json.dumps({"progress": raw}), APP, 1.0)
    assert envelope.payload == raw
    assert isinstance(parse_payload(envelope.kind, envelope.payload), QueryProgress)


def _set_op_field(raw: dict, value: Any) -> dict:
    raw["stateOperators"][0]["numRowsTotal"] = value
    return raw


def _drop_id(raw: dict) -> dict:
    del raw["id"]
    return raw


def _bad_timestamp(raw: dict) -> dict:
    raw["timestamp"] = "yesterday at noon"
    return raw


def _operators_not_list(raw: dict) -> dict:
    raw["stateOperators"] = {"operatorName": "dedupe"}
    return raw


def _bad_custom_metric(raw: dict) -> dict:
    raw["stateOperators"][0]["customMetrics"]["rocksdbGetCount"] = "many"
    return raw


def _bad_watermark(raw: dict) -> dict:
    raw["eventTime"]["watermark"] = 0
    return raw


def _source_not_object(raw: dict) -> dict:
    raw["sources"][0] = "FileStreamSource"
    return raw


BAD_PROGRESS = {
    "non-numeric numRowsTotal": (
        lambda r: _set_op_field(r, "12"),
        "stateOperators[0].numRowsTotal",
    ),
    "boolean numRowsTotal": (lambda r: _set_op_field(r, True), "stateOperators[0].numRowsTotal"),
    "missing id": (_drop_id, "progress.id"),
    "bad timestamp": (_bad_timestamp, "progress.timestamp"),
    "stateOperators not a list": (_operators_not_list, "progress.stateOperators"),
    "non-numeric custom metric": (_bad_custom_metric, "customMetrics.rocksdbGetCount"),
    "numeric watermark": (_bad_watermark, "eventTime.watermark"),
    "source not an object": (_source_not_object, "sources[0]"),
}


@pytest.mark.parametrize("case", sorted(BAD_PROGRESS))
def test_bad_progress_raises_naming_the_field(case: str) -> None:
    spoil, field_name = BAD_PROGRESS[case]
    raw = spoil(progress_of("spark-4.3.0/dedupe_rocksdb.json", 0))
    with pytest.raises(EventParseError) as info:
        parse_progress(raw)
    assert field_name in str(info.value)


def test_not_json_raises_naming_the_event_kind() -> None:
    with pytest.raises(EventParseError, match=r"^progress: event is not valid JSON"):
        envelope_from_json(EventKind.PROGRESS, '{"id": "q", "batchId": ', APP, 1.0)


def test_json_that_is_not_an_object_raises() -> None:
    with pytest.raises(EventParseError, match=r"^idle: expected a JSON object, got list"):
        envelope_from_json(EventKind.IDLE, "[1, 2]", APP, 1.0)


def test_terminated_without_run_id_raises_naming_it() -> None:
    raw = copy.deepcopy(fixture("spark-4.3.0/dedupe_hdfs.json")["terminated"])
    del raw["runId"]
    with pytest.raises(EventParseError, match=r"terminated\.runId"):
        parse_terminated(raw)


def test_unknown_event_kind_raises_listing_the_known_ones() -> None:
    with pytest.raises(EventParseError, match="unknown event kind 'paused'.*started, progress"):
        parse_payload("paused", {})


def test_state_operator_defaults_when_a_future_spark_drops_a_field() -> None:
    raw = progress_of("spark-4.3.0/dedupe_hdfs.json")
    del raw["stateOperators"][0]["allRemovalsTimeMs"]
    op: StateOperator = parse_progress(raw).state_operators[0]
    assert op.all_removals_time_ms == 0
    assert op.num_rows_total == raw["stateOperators"][0]["numRowsTotal"]
