"""The PostgreSQL bulk path: new batches go in by COPY, replays fall back to idempotent INSERTs."""

from __future__ import annotations

import math

from sparkwatch.history.rows import json_safe
from sparkwatch.jsoncodec import dumps_text as json_text
from tests.test_history_idempotency import RAW
from tests.test_history_support import batch_of, counts, fetch, progress, writer


def test_new_batches_are_copied_and_read_back_exactly(pg_url: str) -> None:
    events = [progress(batch_of(RAW, b, f"2026-11-21T09:33:{b:02d}.000Z")) for b in range(5)]
    with writer(pg_url) as w:
        w.write(events)
        assert w._copy is True  # the COPY path ran, not the fallback
    assert counts(pg_url)["batches"] == 5
    assert counts(pg_url)["operator_batches"] == 5
    [row] = [r for r in fetch(pg_url, "operator_batches") if r["batch_id"] == 3]
    op = RAW["stateOperators"][0]
    assert row["num_rows_total"] == op["numRowsTotal"]
    assert row["custom_metrics"] == op["customMetrics"]


def test_a_write_overlapping_written_batches_keeps_one_row_each_and_adds_the_new(
    pg_url: str,
) -> None:
    first = [progress(batch_of(RAW, b, f"2026-11-21T09:33:{b:02d}.000Z")) for b in range(3)]
    overlap = [progress(batch_of(RAW, b, f"2026-11-21T09:33:{b:02d}.000Z")) for b in range(1, 6)]
    with writer(pg_url) as w:
        w.write(first)
        w.write(overlap)  # COPY hits a unique violation; the INSERT fallback absorbs it
        w.write([progress(batch_of(RAW, 6, "2026-11-21T09:33:06.000Z"))])  # COPY again
    assert counts(pg_url) == {"query_runs": 1, "batches": 7, "operator_batches": 7,
                              "source_batches": 7, "sink_batches": 7}


def test_json_columns_are_encoded_safely_for_postgresql() -> None:
    assert json_text(json_safe({"a": 1, "b": 2.5})) == '{"a":1,"b":2.5}'
    assert json_text(json_safe({"a": math.nan, "b": math.inf})) == '{"a":"NaN","b":"Infinity"}'
    assert json_text(json_safe({"k\x00": "v\x00"})) == '{"k\ufffd":"v\ufffd"}'
    assert json_safe({"nested": {"x": -math.inf}}) == {"nested": {"x": "-Infinity"}}
