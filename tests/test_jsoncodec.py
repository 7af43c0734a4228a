"""The shared JSON fast path reads what the standard library reads and writes compact JSON."""

from __future__ import annotations

import json
import math

from sparkwatch.jsoncodec import LEAN_DECODE_BYTES, dumps_text, loads


def test_nan_and_infinity_literals_that_orjson_refuses_are_still_read() -> None:
    value = loads(b'{"a": NaN, "b": -Infinity, "c": 1}')
    assert math.isnan(value["a"]) and value["b"] == -math.inf and value["c"] == 1


def test_a_document_over_the_lean_size_decodes_to_the_same_value() -> None:
    items = [{"id": f"q{i}", "rows": i} for i in range(LEAN_DECODE_BYTES // 20)]
    raw = json.dumps({"events": items}).encode()
    assert len(raw) > LEAN_DECODE_BYTES
    assert loads(raw) == {"events": items}


def test_values_are_written_compact_and_read_back_equal() -> None:
    value = {"numRowsTotal": 9223372036854775807, "name": "naïve \u2028 <b>", "m": [1.5, None]}
    text = dumps_text(value)
    assert ", " not in text and ": " not in text
    assert json.loads(text) == value
