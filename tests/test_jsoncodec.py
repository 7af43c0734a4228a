"""The shared JSON fast path reads what the standard library reads and writes compact JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import sqlalchemy as sa

from sparkwatch import jsoncodec
from sparkwatch.history.columns import batch_json_type
from sparkwatch.history.engine import create_engine
from sparkwatch.jsoncodec import LEAN_DECODE_BYTES, dumps_text, loads, try_dumps


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


def test_try_dumps_gives_orjsons_bytes_or_none_where_orjson_refuses() -> None:
    assert try_dumps({"a": [1, 2.5, None]}) == b'{"a":[1,2.5,null]}'
    assert try_dumps({1: "a key that is not a string"}) is None
    assert try_dumps({"a": object()}) is None  # a type it does not know: the caller cleans up


def test_a_driver_without_orjson_reads_and_writes_the_same_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Spark driver may lack orjson (the listener does not require it): the standard library
    then gives the same values in compact text, and try_dumps leaves it to the caller."""
    value = {"numRowsTotal": 9223372036854775807, "name": "naïve <b>", "m": [1.5, None]}
    with_orjson = dumps_text(value)
    monkeypatch.setattr(jsoncodec, "_orjson", None)
    without = dumps_text(value)
    assert ", " not in without and ": " not in without
    assert json.loads(without) == json.loads(with_orjson) == value
    assert loads(with_orjson.encode()) == value
    assert math.isnan(loads(b'{"a": NaN}')["a"])
    assert try_dumps(value) is None


def test_a_json_column_is_written_compact_whatever_orjson_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The history's engines write JSON columns with dumps_text: orjson's text where it takes
    the value, the standard library's compact text where it does not (a key that is not a
    string, an integer over 64 bits), and the same without orjson."""
    assert dumps_text({"rocksdbGetCount": 6, "m": [1.5, None]}) == (
        '{"rocksdbGetCount":6,"m":[1.5,null]}')
    assert dumps_text({1: "a", "big": 2**70}) == '{"1":"a","big":1180591620717411303424}'
    value = {"name": "naïve <b>", "n": 9223372036854775807}
    fast = dumps_text(value)
    monkeypatch.setattr(jsoncodec, "_orjson", None)
    assert dumps_text(value) == json.dumps(value, separators=(",", ":"))
    assert json.loads(dumps_text(value)) == json.loads(fast) == value


def test_the_history_engine_stores_json_columns_as_compact_text(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'h.db'}")
    table = sa.Table("t", sa.MetaData(), sa.Column("m", batch_json_type()))
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"m": {"rocksdbGetCount": 6, "name": "naïve"}}])
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT m FROM t")).scalar_one() == (
            '{"rocksdbGetCount":6,"name":"naïve"}')
        assert conn.execute(sa.select(table.c.m)).scalar_one() == {
            "rocksdbGetCount": 6, "name": "naïve"}
    engine.dispose()
