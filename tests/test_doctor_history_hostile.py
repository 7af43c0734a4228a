"""`sparkwatch doctor` reading a broken SQLite history: custom metrics that are not numbers or
not a map, numbers past any real count in integer columns (SQLite keeps whatever it is given),
NaN and infinities. Doctor gives its verdict (exit 0 or 1) with strict JSON, never a traceback
or a misleading "database URL refused"; counts are shown exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sparkwatch.history import migrate
from tests.support import run_cli
from tests.test_history_support import batch_of, engine_for, load_sample, progress, started, write

JOIN = load_sample("stream_stream_join_rocksdb")  # a RocksDB store: its custom metrics are read
QUERY, RUN = "c1000000-0000-4000-8000-000000000001", "c1000000-run-1"
INT64_MAX = 2**63 - 1


def _strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def history(sqlite_url: str) -> str:
    """A RocksDB join's run of three batches, written by the writer."""
    migrate.upgrade(sqlite_url)
    batches = [progress(batch_of(JOIN, b, f"2026-11-21T09:0{b}:00.000Z", id=QUERY, runId=RUN,
                                 name="join"))
               for b in range(3)]
    write(sqlite_url, started(QUERY, RUN, "join", "2026-11-21T08:59:00.000Z"), *batches)
    return sqlite_url


def _set(url: str, sql: str, *params: object) -> None:
    with engine_for(url).begin() as conn:
        conn.exec_driver_sql(sql, params)


def _doctor(capsys: pytest.CaptureFixture[str], url: str, fmt: str) -> tuple[int, str, str]:
    return run_cli(capsys, "doctor", "--url", url, "--format", fmt)


@pytest.mark.parametrize("metrics", [
    '{"rocksdbGetCount": 5, "rocksdbWriterStallLatencyMs": "NaN"}',  # the writer's spelling
    '{"rocksdbGetCount": 5, "rocksdbWriterStallLatencyMs": "a lot"}',
    '{"rocksdbGetCount": 5, "rocksdbWriterStallLatencyMs": NaN}',
    '{"rocksdbGetCount": 5, "rocksdbReadBlockCacheMissCount": 1e999}',
    '{"rocksdbGetCount": 5, "rocksdbWriterStallLatencyMs": ' + "9" * 400 + "}",
    '{"rocksdbGetCount": 5, "rocksdbWriterStallLatencyMs": {"ms": 1}}',
    '{"rocksdbGetCount": 5, "rocksdbWriterStallLatencyMs": true}',
])
def test_custom_metrics_that_are_no_finite_number_count_as_none(
        history: str, metrics: str, capsys: pytest.CaptureFixture[str]) -> None:
    _set(history, "UPDATE operator_batches SET custom_metrics = ?", metrics)
    code, out, err = _doctor(capsys, history, "json")
    report = _strict_json(out)
    assert (code, err) == (0, "")
    assert [f["code"] for f in report["findings"]] == []
    assert report["checked"][0]["query_id"] == QUERY


@pytest.mark.parametrize("metrics", ["[1, 2]", '"text"', "5"])
def test_custom_metrics_that_are_not_a_map_are_none(
        history: str, metrics: str, capsys: pytest.CaptureFixture[str]) -> None:
    _set(history, "UPDATE operator_batches SET custom_metrics = ?", metrics)
    for fmt in ("text", "json"):
        code, out, err = _doctor(capsys, history, fmt)
        assert (code, err) == (0, ""), fmt  # was a TypeError, or "database URL refused"
    assert _strict_json(out)["checked"][0]["operators"] == 1


def test_rows_past_any_real_count_give_a_verdict_not_an_overflow(
        history: str, capsys: pytest.CaptureFixture[str]) -> None:
    # SQLite stores a REAL in an INTEGER column as it is; the line fit squared it.
    _set(history, "UPDATE operator_batches SET num_rows_total = 1e308 WHERE batch_id = 2")
    for fmt in ("text", "json"):
        code, out, err = _doctor(capsys, history, fmt)
        assert (code, err) == (1, ""), fmt  # that much state in two stores is a warning
    assert [f["code"] for f in _strict_json(out)["findings"]] == ["too-few-state-stores"]


def test_json_report_is_strict_json_when_a_sum_of_finite_counts_overflows(
        history: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Three batches of 1e308 input rows (SQLite keeps a REAL in an INTEGER column) sum to an
    # infinity: null in the report, as the collector's API writes a non-finite number.
    _set(history, "UPDATE batches SET num_input_rows = 1e308")
    _set(history, "UPDATE operator_batches SET num_rows_dropped_by_watermark = 4")
    code, out, err = _doctor(capsys, history, "json")
    report = _strict_json(out)
    assert (code, err) == (1, "")
    [late] = report["findings"]
    assert late["code"] == "late-rows-dropped"
    assert (late["numbers"]["rows_dropped"], late["numbers"]["input_rows"]) == (12, None)
    assert report["checked"][0]["batches"] == 3


@pytest.mark.parametrize(("statement", "column", "shown"), [
    ("UPDATE operator_batches SET num_rows_total = 'lots'", "operator_batches.num_rows_total",
     "'lots'"),
    ("UPDATE batches SET batch_duration_ms = 'slow'", "batches.batch_duration_ms", "'slow'"),
    ("UPDATE operator_batches SET memory_used_bytes = 'big' WHERE batch_id = 2",
     "operator_batches.memory_used_bytes", "'big'"),
    ("UPDATE operator_batches SET num_rows_updated = x'1b5b324a'",
     "operator_batches.num_rows_updated", "b'\\x1b[2J'"),
    # An infinity (SQLite's 9e999) where a point has no "no value": refused as text is.
    ("UPDATE batches SET num_input_rows = 9e999", "batches.num_input_rows", "inf"),
    ("UPDATE operator_batches SET num_rows_total = -9e999", "operator_batches.num_rows_total",
     "-inf"),
])
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_row_holding_no_finite_number_where_one_belongs_is_one_line_naming_the_column(
        history: str, statement: str, column: str, shown: str, fmt: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Doctor's arithmetic met the text: a traceback (ValueError: could not convert string to
    float: 'lots'; TypeError: unsupported operand type(s) for +)."""
    _set(history, statement)
    code, out, err = _doctor(capsys, history, fmt)
    assert (code, out) == (2, "")
    assert err == (f"sparkwatch doctor: error: {column} of query {QUERY} holds {shown}, not a "
                   f"finite number\n")


def test_a_count_at_the_int64_edge_is_shown_exactly(
        history: str, capsys: pytest.CaptureFixture[str]) -> None:
    _set(history, "UPDATE operator_batches SET num_rows_total = ?, num_shuffle_partitions = 1",
         INT64_MAX)
    code, out, err = _doctor(capsys, history, "text")
    assert (code, err) == (1, "")
    # Through a float, the count read one more: 9,223,372,036,854,775,808.
    assert "1 state stores hold 9,223,372,036,854,775,807 rows and" in out
