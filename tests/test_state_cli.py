"""`sparkwatch state` without a Spark session: the version gate, the options, skew figures and
how keys are grouped."""

from __future__ import annotations

import argparse

import pytest

from sparkwatch.cli.main import build_parser, main
from sparkwatch.cli.state import batch_window
from sparkwatch.cli.state import request as state_request
from sparkwatch.state.inspect import Request, check_batches, chosen
from sparkwatch.state.model import Partition
from sparkwatch.state.skew import skew
from sparkwatch.state.source import StateError, require_spark_4


def test_pyspark_35_is_told_that_state_needs_spark_4() -> None:
    with pytest.raises(StateError, match=r"reading state needs Spark 4\.0 or later .*PySpark 3\.5"):
        require_spark_4("3.5.9")
    require_spark_4("4.0.0")


def test_changes_range() -> None:
    assert batch_window("3..7") == (3, 7) and batch_window("5..5") == (5, 5)
    assert batch_window(" 0 .. 9223372036854775807 ") == (0, 2**63 - 1)
    for bad in ("7", "a..b", "3-7", "-1..3", "..3", "1.5..3"):
        with pytest.raises(argparse.ArgumentTypeError, match="wants FROM..TO batch ids"):
            batch_window(bad)


HUGE = str(10**30)


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--top", "-1"], "argument --top: must not be negative"),
        # Spark's limit() takes a 32-bit int: past it the JVM's error, not naming --top.
        (["--top", HUGE], "argument --top: must be at most 2147483647"),
        (["--top", str(2**31)], "argument --top: must be at most 2147483647"),
        (["--top", "1e3"], "argument --top: not a whole number: '1e3'"),
        (["--batch-id", "-3"], "argument --batch-id: must not be negative"),
        # Batch ids are 64-bit: a larger one was Spark's NumberFormatException, "For input
        # string", as if the checkpoint could not be read.
        (["--batch-id", HUGE], "argument --batch-id: must be at most 9223372036854775807"),
        (["--batch-id", "nan"], "argument --batch-id: not a whole number: 'nan'"),
        (["--operator", "-1"], "argument --operator: must not be negative"),
        (["--operator", HUGE], "argument --operator: must be at most 2147483647"),
        (["--changes", f"0..{HUGE}"],
         "argument --changes: batch ids must be at most 9223372036854775807"),
        (["--changes", f"{2**63}..{2**63}"],
         "argument --changes: batch ids must be at most 9223372036854775807"),
        (["--changes", "7..3"], "argument --changes: FROM must not be after TO (7 > 3)"),
        # Digits int() does not read (a superscript two): was int()'s own message.
        (["--changes", "\u00b2..3"],
         "argument --changes: wants FROM..TO batch ids, e.g. 3..7, not '\u00b2..3'"),
        (["--changes", "1" * 5000 + "..1"],
         "argument --changes: batch ids must be at most 9223372036854775807"),
    ],
)
def test_numbers_out_of_range_are_usage_errors_naming_the_option(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before Spark starts: no session, no JVM error to decipher."""
    with pytest.raises(SystemExit) as exit_info:
        main(["state", "/chk", *argv])
    out, err = capsys.readouterr()
    assert (exit_info.value.code, out) == (2, "")
    assert err.splitlines()[-1] == f"sparkwatch state: error: {error}"
    assert "Traceback" not in err


def test_the_largest_numbers_in_range_are_accepted() -> None:
    args = build_parser().parse_args(
        ["state", "/chk", "--top", "0", "--batch-id", str(2**63 - 1), "--operator",
         str(2**31 - 1), "--changes", f"0..{2**63 - 1}"])
    req = state_request(args)
    assert (req.top, req.batch_id, req.operator, req.changes) == (
        0, 2**63 - 1, 2**31 - 1, (0, 2**63 - 1))


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


@pytest.mark.parametrize(("req", "error"), [
    (Request("cp", batch_id=9), "--batch-id 9: the checkpoint's latest committed batch is 3"),
    (Request("cp", changes=(2, 9)), "--changes 2..9: the checkpoint's latest committed batch is 3"),
])
def test_batches_past_the_latest_committed_are_refused_naming_the_option(
        req: Request, error: str) -> None:
    with pytest.raises(StateError) as refused:
        check_batches(3, req)
    assert str(refused.value) == error


def test_batches_up_to_the_latest_committed_are_taken() -> None:
    check_batches(3, Request("cp", batch_id=3, changes=(0, 3)))
    check_batches(None, Request("cp", batch_id=9))  # no state: nothing to hold them to


@pytest.mark.parametrize(("req", "given"), [
    (Request("cp", operator=0), "--operator 0"),
    (Request("cp", store="default"), "--store default"),
])
def test_a_filter_on_a_checkpoint_without_state_is_refused_not_an_empty_report(
        req: Request, given: str) -> None:
    with pytest.raises(StateError) as refused:
        chosen([], req)
    assert str(refused.value) == f"nothing matches {given}: the checkpoint has no state stores"
    assert chosen([], Request("cp")) == []
