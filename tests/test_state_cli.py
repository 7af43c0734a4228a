"""`sparkwatch state` without a Spark session: the version gate, the options, skew figures and
how keys are grouped."""

from __future__ import annotations

import pytest

from sparkwatch.cli.main import main
from sparkwatch.state.changes import parse_range
from sparkwatch.state.model import Partition
from sparkwatch.state.skew import skew
from sparkwatch.state.source import StateError, require_spark_4


def test_pyspark_35_is_told_that_state_needs_spark_4() -> None:
    with pytest.raises(StateError, match=r"reading state needs Spark 4\.0 or later .*PySpark 3\.5"):
        require_spark_4("3.5.9")
    require_spark_4("4.0.0")


def test_changes_range() -> None:
    assert parse_range("3..7") == (3, 7) and parse_range("5..5") == (5, 5)
    for bad in ("7", "a..b", "7..3", "3-7"):
        with pytest.raises(ValueError, match="--changes"):
            parse_range(bad)


def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["state", "/chk", "--top", "-1"]) == 2
    assert "--top must be 0 or more" in capsys.readouterr().err
    assert main(["state", "/chk", "--batch-id", "-3"]) == 2
    assert "--batch-id must be 0 or more" in capsys.readouterr().err


def test_skew_is_the_largest_partition_over_the_median() -> None:
    parts = [Partition(0, 10, 100), Partition(1, 500, 5000), Partition(2, 12, 120),
             Partition(3, 0, 0)]
    sk = skew(parts)
    assert (sk.max_rows, sk.max_bytes, sk.median_bytes) == (500, 5000, 110.0)
    assert round(sk.ratio, 1) == 45.5
    assert [p.partition_id for p in sk.worst] == [1, 2, 0]
    assert skew([Partition(0, 0, 0), Partition(1, 0, 0)]).ratio == 1.0


def test_keys_are_grouped_without_event_time_or_the_join_index() -> None:
    types = pytest.importorskip("pyspark.sql.types")
    from sparkwatch.state.profile import shape

    window = types.StructType([types.StructField("start", types.TimestampType()),
                               types.StructField("end", types.TimestampType())])
    agg = types.StructType([types.StructField("window", window),
                            types.StructField("key", types.StringType())])
    assert shape(agg, "default") == shape(agg, "default", "stateStoreSave")
    s = shape(agg, "default")
    assert (s.fields, s.time_field, s.window) == (("key",), "window", True)
    join = types.StructType([types.StructField("field0", types.LongType()),
                             types.StructField("index", types.LongType())])
    assert shape(join, "left-keyWithIndexToValue").fields == ("field0",)
    assert shape(join, "left-keyToNumValues").fields == ("field0", "index")
    session = types.StructType([types.StructField("user", types.LongType()),
                                types.StructField("sessionStartTime", types.TimestampType())])
    s = shape(session, "default", "sessionWindowStateStoreSaveExec")
    assert (s.fields, s.time_field) == (("user",), None)
