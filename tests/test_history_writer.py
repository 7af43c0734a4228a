"""Every field of real Spark progress events lands in the history, on SQLite and PostgreSQL.

Expected values come straight from the sample JSON (Spark's camelCase names), not from the event
model, so a mapping mistake in the writer cannot hide behind the same mistake in the test.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import SPARK_OPERATOR_NUMBERS
from tests.test_history_support import (
    APP,
    SAMPLES,
    fetch,
    load_sample,
    migrated_database,
    progress,
    utc,
    write,
)

OPERATOR_FIELDS = {"operatorName": "operator_name", **SPARK_OPERATOR_NUMBERS}
DURATION_KEYS = ("addBatch", "getBatch", "latestOffset", "getOffset", "queryPlanning", "walCommit",
                 "commitOffsets", "triggerExecution")
# Each durationMs key Spark reports today has a batches column: its name in snake case, in ms
# (stated as a rule here, not copied from sparkwatch/history/rows.py, so the test checks it).
DURATION_COLUMNS = {key: re.sub(r"(?<!^)([A-Z])", r"_\1", key).lower() + "_ms"
                    for key in DURATION_KEYS}
EVENT_TIME_COLUMNS = {
    "min": "event_time_min",
    "max": "event_time_max",
    "avg": "event_time_avg",
    "watermark": "watermark",
}


def _time_or_none(iso: str | None) -> Any:
    return None if iso is None else utc(iso)


def assert_batch(row: dict[str, Any], raw: dict[str, Any]) -> None:
    assert row["run_id"] == raw["runId"]
    assert row["query_id"] == raw["id"]
    assert row["batch_id"] == raw["batchId"]
    assert row["timestamp"] == utc(raw["timestamp"])
    # Spark 3.5 progress has no batchDuration; the event model takes triggerExecution instead.
    trigger_ms = raw["durationMs"]["triggerExecution"]
    assert row["batch_duration_ms"] == raw.get("batchDuration", trigger_ms)
    assert row["num_input_rows"] == raw["numInputRows"]
    assert row["input_rows_per_second"] == raw.get("inputRowsPerSecond")
    assert row["processed_rows_per_second"] == raw.get("processedRowsPerSecond")
    assert row["duration_ms"] == raw["durationMs"]
    for key, column in DURATION_COLUMNS.items():
        assert row[column] == raw["durationMs"].get(key), column
    event_time = raw.get("eventTime", {})
    for key, column in EVENT_TIME_COLUMNS.items():
        assert row[column] == _time_or_none(event_time.get(key)), column
    assert row["observed_metrics"] == raw.get("observedMetrics", {})


def assert_operators(rows: list[dict[str, Any]], raw: dict[str, Any]) -> None:
    assert [r["operator_index"] for r in rows] == list(range(len(raw["stateOperators"])))
    for row, op in zip(rows, raw["stateOperators"], strict=True):
        assert (row["run_id"], row["batch_id"]) == (raw["runId"], raw["batchId"])
        assert (row["query_id"], row["timestamp"]) == (raw["id"], utc(raw["timestamp"]))
        for key, column in OPERATOR_FIELDS.items():
            assert row[column] == op[key], column
        assert row["custom_metrics"] == op.get("customMetrics", {})


def assert_sources(rows: list[dict[str, Any]], raw: dict[str, Any]) -> None:
    assert [r["source_index"] for r in rows] == list(range(len(raw["sources"])))
    for row, src in zip(rows, raw["sources"], strict=True):
        assert (row["query_id"], row["timestamp"]) == (raw["id"], utc(raw["timestamp"]))
        assert row["description"] == src["description"]
        assert row["start_offset"] == src["startOffset"]
        assert row["end_offset"] == src["endOffset"]
        assert row["latest_offset"] == src["latestOffset"]
        assert row["num_input_rows"] == src["numInputRows"]
        assert row["input_rows_per_second"] == src.get("inputRowsPerSecond")
        assert row["processed_rows_per_second"] == src.get("processedRowsPerSecond")
        assert row["metrics"] == src.get("metrics", {})


def assert_sink(rows: list[dict[str, Any]], raw: dict[str, Any]) -> None:
    if "sink" not in raw:
        assert rows == []
        return
    [row] = rows
    assert (row["query_id"], row["timestamp"]) == (raw["id"], utc(raw["timestamp"]))
    assert row["description"] == raw["sink"]["description"]
    assert row["num_output_rows"] == raw["sink"].get("numOutputRows", -1)
    assert row["metrics"] == raw["sink"].get("metrics", {})


def assert_round_trip(url: str, raw: dict[str, Any]) -> None:
    run_id = raw["runId"]
    [batch] = fetch(url, "batches", run_id)
    assert_batch(batch, raw)
    assert_operators(fetch(url, "operator_batches", run_id), raw)
    assert_sources(fetch(url, "source_batches", run_id), raw)
    assert_sink(fetch(url, "sink_batches", run_id), raw)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """One migrated database per backend for this module: every test writes its own run ids."""
    yield from migrated_database(request)


def fresh_run(raw: dict[str, Any]) -> dict[str, Any]:
    """The sample as a run of its own (modified samples must not collide with the original)."""
    return {**raw, "runId": str(uuid.uuid4())}


@pytest.mark.parametrize("sample", SAMPLES)
def test_every_progress_field_round_trips(db_url: str, sample: str) -> None:
    raw = load_sample(sample)
    write(db_url, progress(raw))
    assert_round_trip(db_url, raw)


def _unusual_progress() -> dict[str, Any]:
    """A real progress bent into what the samples lack: Kafka-style offsets and source metrics,
    NaN rates (omitted), a V1 source (getOffset), a V1 sink (numOutputRows -1), an unknown
    customMetrics key, two operators of one kind, observed metrics of several types."""
    raw = fresh_run(copy.deepcopy(load_sample("window_agg")))
    raw.pop("inputRowsPerSecond")
    raw["durationMs"] = {"getOffset": 3, "getBatch": 1, "triggerExecution": 12}
    raw["observedMetrics"] = {"obs": {"rows": 20, "avg": 2.5, "label": "x", "none": None}}
    second = copy.deepcopy(raw["stateOperators"][0])
    second["customMetrics"] = {"someFutureSparkMetric": 42, "numDroppedDuplicateRows": 7}
    raw["stateOperators"].append(second)
    raw["sources"][0].update(
        startOffset={"orders": {"0": 120, "1": 98}},
        endOffset={"orders": {"0": 130, "1": 101}},
        latestOffset=None,
        metrics={"maxOffsetsBehindLatest": "12", "avgOffsetsBehindLatest": "6.5"},
    )
    raw["sources"][0].pop("processedRowsPerSecond")
    raw["sink"] = {"description": "ForeachBatchSink", "numOutputRows": -1, "metrics": {"k": "v"}}
    return raw


def test_unusual_progress_fields_round_trip(db_url: str) -> None:
    raw = _unusual_progress()
    write(db_url, progress(raw))
    assert_round_trip(db_url, raw)
    [batch] = fetch(db_url, "batches", raw["runId"])
    assert batch["input_rows_per_second"] is None
    assert (batch["get_offset_ms"], batch["latest_offset_ms"]) == (3, None)


def test_progress_without_sink_writes_no_sink_row(db_url: str) -> None:
    raw = fresh_run(load_sample("dedupe"))
    del raw["sink"]
    write(db_url, progress(raw))
    assert fetch(db_url, "sink_batches", raw["runId"]) == []
    assert len(fetch(db_url, "operator_batches", raw["runId"])) == 1


def test_values_postgresql_would_reject_are_stored_rewritten(db_url: str) -> None:
    """JSONB refuses NaN and NUL; a poison value must not make every retry fail. The contract
    refuses both at the door; the writer still rewrites them, behind it, for a record that got
    past (e.g. spooled by an older collector)."""
    raw = fresh_run(load_sample("window_agg"))
    parsed = progress(raw)
    poisoned = dataclasses.replace(
        parsed.event,
        observed_metrics={"obs": {"ratio": float("nan"), "big": float("inf")}},
        sources=(dataclasses.replace(parsed.event.sources[0], description="rate\x00source"),),
    )
    write(db_url, dataclasses.replace(parsed, event=poisoned))
    [batch] = fetch(db_url, "batches", raw["runId"])
    assert batch["observed_metrics"] == {"obs": {"ratio": "NaN", "big": "Infinity"}}
    assert fetch(db_url, "source_batches", raw["runId"])[0]["description"] == "rate\ufffdsource"


def test_progress_records_its_run(db_url: str) -> None:
    raw = load_sample("stream_stream_join_rocksdb")
    write(db_url, progress(raw))
    [run] = fetch(db_url, "query_runs", raw["runId"])
    assert run["run_id"] == raw["runId"]
    assert run["query_id"] == raw["id"]
    assert run["name"] == "stream_stream_join"
    assert (run["app_name"], run["app_id"], run["spark_version"]) == (
        APP.name,
        APP.id,
        APP.spark_version,
    )
    assert run["last_event_at"] == utc(raw["timestamp"])
