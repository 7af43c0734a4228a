"""Plan parsing without Spark: executed plans captured from real Spark 3.5.9 and 4.3.0 runs
(scripts/capture_plans.py) map to the right operator kind, keys, watermark and state stores."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.metrics.catalogue import OPERATOR_IDENTITY_LABELS
from sparkwatch.plan.codec import plan_from_dict, plan_to_dict
from sparkwatch.plan.describe import delay_text, label_values, summary
from sparkwatch.plan.mapping import from_progress, map_plan
from sparkwatch.plan.model import OperatorIdentity, RawPlan, Source
from sparkwatch.plan.text import interval_ms, split_top_level
from sparkwatch.plan.tree import parse_tree

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans"
VERSIONS = ("spark-3.5.9", "spark-4.3.0")


@dataclass(frozen=True)
class Expected:
    kind: str
    keys: tuple[str, ...]
    delay_ms: int | None
    mode: str
    provider: str
    event_time_keys: tuple[str, ...] = ()
    details: tuple[tuple[str, Any], ...] = ()


WM = 5000
EXPECTED: dict[str, list[Expected]] = {
    "window_agg": [Expected("aggregation", ("window", "key"), WM, "append", "hdfs", ("window",))],
    "dedupe": [Expected("dedupe", ("key", "ts"), WM, "append", "rocksdb", ("ts",))],
    "dedupe_within_watermark": [
        Expected("dedupe_within_watermark", ("key", "v"), WM, "append", "hdfs")
    ],
    "session_window": [
        Expected(
            "session_window", ("key", "session_window"), WM, "append", "rocksdb",
            ("session_window",),
        )
    ],
    "stream_join": [
        Expected(
            "stream_stream_join", ("key",), WM, "append", "rocksdb",
            details=(
                ("join_type", "Inner"),
                ("right_keys", ["key"]),
                ("state_cleanup", {"left": "value", "right": "value"}),
                ("side_watermarks", {"left": ["ts"], "right": ["ts"]}),
            ),
        )
    ],
    "global_limit": [
        Expected("global_limit", (), None, "append", "hdfs", details=(("limit", 25),))
    ],
    "apply_in_pandas_with_state": [
        Expected(
            "apply_in_pandas_with_state", ("key",), None, "update", "hdfs",
            details=(("timeout", "NoTimeout"),),
        )
    ],
    "transform_with_state": [
        Expected(
            "transform_with_state_in_pandas", ("user",), None, "update", "rocksdb",
            details=(("time_mode", "NoTime"),),
        )
    ],
    # Spark lists the operator nearest the sink first.
    "chained": [
        Expected("aggregation", ("window", "key"), WM, "append", "hdfs", ("window",)),
        Expected("dedupe", ("key", "ts"), WM, "append", "hdfs", ("ts",)),
    ],
    "two_aggregations": [
        Expected("aggregation", ("window", "key"), WM, "append", "hdfs", ("window",)),
        Expected("aggregation", ("window", "key"), WM, "append", "hdfs", ("window",)),
    ],
    "agg_watermark_not_key": [Expected("aggregation", ("key",), WM, "update", "hdfs")],
    "agg_no_watermark": [Expected("aggregation", ("key",), None, "update", "hdfs")],
    "dedupe_no_watermark": [Expected("dedupe", ("key",), None, "append", "hdfs")],
    "join_no_bounds": [
        Expected(
            "stream_stream_join", ("key",), None, "append", "rocksdb",
            details=(("state_cleanup", {"left": None, "right": None}), ("has_condition", False)),
        )
    ],
}


def fixtures() -> list[tuple[str, str]]:
    return [(v, p.stem) for v in VERSIONS for p in sorted((PLANS / v).glob("*.json"))]


def load(version: str, name: str) -> dict[str, Any]:
    return json.loads((PLANS / version / f"{name}.json").read_text())


def check(op: OperatorIdentity, want: Expected) -> None:
    assert (op.kind, op.keys, op.watermark_delay_ms) == (want.kind, want.keys, want.delay_ms)
    assert (op.output_mode, op.state_store_provider) == (want.mode, want.provider)
    assert op.event_time_keys == want.event_time_keys
    for key, value in want.details:
        assert op.details[key] == value, key


def test_every_captured_plan_has_an_expectation() -> None:
    assert {name for _, name in fixtures()} == set(EXPECTED)


@pytest.mark.parametrize(("version", "name"), fixtures())
def test_captured_plan_maps_every_operator(version: str, name: str) -> None:
    data = load(version, name)
    raw = RawPlan.from_dict(data["raw"])
    plan = map_plan(raw, data["operators"])
    assert plan.source is Source.PLAN, plan.note
    assert [op.operator for op in plan.operators] == data["operators"]
    assert len(plan.operators) == len(EXPECTED[name])
    for op, want in zip(plan.operators, EXPECTED[name], strict=True):
        check(op, want)
        assert op.num_state_stores == 2  # spark.sql.shuffle.partitions of the capture
        assert op.checkpoint_location == f"{raw.state_checkpoint}/{op.operator_id}"
    # Operator ids count from the sink too: index and opId agree in every captured plan.
    assert [op.operator_id for op in plan.operators] == list(range(len(plan.operators)))


def test_session_window_on_35_is_reported_as_default_name() -> None:
    data = load("spark-3.5.9", "session_window")
    assert data["operators"] == ["defaultName"]
    assert map_plan(RawPlan.from_dict(data["raw"]), data["operators"]).operators[0].kind == (
        "session_window"
    )


def test_without_progress_names_the_plan_names_its_operators() -> None:
    data = load("spark-4.3.0", "chained")
    plan = map_plan(RawPlan.from_dict(data["raw"]))
    assert [op.operator for op in plan.operators] == ["stateStoreSave", "dedupe"]


@pytest.mark.parametrize(
    ("operators", "reason"),
    [
        (["stateStoreSave"], "the plan has 2 state operators, the progress 1"),
        (["dedupe", "stateStoreSave"], "operator 0 is dedupe in the progress but StateStoreSave"),
    ],
)
def test_a_plan_disagreeing_with_the_progress_degrades(operators: list[str], reason: str) -> None:
    raw = RawPlan.from_dict(load("spark-4.3.0", "chained")["raw"])
    plan = map_plan(raw, operators)
    assert plan.source is Source.PROGRESS
    assert plan.note is not None and plan.note.startswith(reason)
    assert [(op.operator, op.node) for op in plan.operators] == [(n, None) for n in operators]


def test_an_unknown_state_writer_of_a_future_spark_still_maps() -> None:
    tree = (
        "WriteToDataSourceV2 MicroBatchWrite[epoch: 1]\n"
        "+- StreamingFancyState [user#4], state info [ checkpoint = s3://b/cp/state, runId = r, "
        "opId = 0, ver = 1, numPartitions = 200] stateStoreCkptIds = None, Update\n"
        "   +- LocalTableScan <empty>, [user#4]"
    )
    plan = map_plan(RawPlan("q", "r", 1, tree, "Update", "s3://b/cp/state"), ["fancyState"])
    [op] = plan.operators
    assert (op.kind, op.node, op.keys, op.num_state_stores) == (
        "unknown", "StreamingFancyState", ("user",), 200
    )
    assert op.checkpoint_location == "s3://b/cp/state/0"


def test_from_progress_keeps_names_and_kinds_only() -> None:
    plan = from_progress("q", "r", ["symmetricHashJoin", "somethingNew"], "Spark Connect")
    assert [(op.operator, op.kind, op.keys) for op in plan.operators] == [
        ("symmetricHashJoin", "stream_stream_join", ()),
        ("somethingNew", "unknown", ()),
    ]
    assert summary(plan.operators[0]) == "stream_stream_join (plan not read)"


def test_tree_parsing_handles_codegen_marks_and_continuation_lines() -> None:
    nodes = parse_tree(
        "*(2) Project [a#1]\n"
        "+- !FlatMapGroupsInPandasWithState f(a#1)#2, [a#1], state info [ ... ]\n"
        "   second line of the same node\n"
        "   :- *(1) Sort [a#1 ASC]\n"
        "   +- Exchange hashpartitioning(a#1, 2)\n"
    )
    assert [(n.depth, n.name) for n in nodes] == [
        (0, "Project"),
        (1, "FlatMapGroupsInPandasWithState"),
        (2, "Sort"),
        (2, "Exchange"),
    ]
    assert nodes[1].args.endswith("second line of the same node")


def test_text_helpers() -> None:
    assert split_top_level(
        "[key#1], session_window#3: struct<start: timestamp, end: timestamp>, state info [ a, b ]"
        ", Append"
    ) == [
        "[key#1]",
        "session_window#3: struct<start: timestamp, end: timestamp>",
        "state info [ a, b ]",
        "Append",
    ]
    assert split_top_level("cond = [ both = ((a >= b) AND (c <= d)) ], 2") == [
        "cond = [ both = ((a >= b) AND (c <= d)) ]",
        "2",
    ]
    assert interval_ms("1 hours 30 minutes") == 5_400_000
    assert interval_ms("6.5 seconds") == 6500
    assert interval_ms("2 days") == 172_800_000
    assert interval_ms("soon") is None
    assert [delay_text(ms) for ms in (None, 1500, 5000, 5_400_000, 90_061_000)] == [
        "-", "1500ms", "5s", "1h30m", "1d1h1m1s"
    ]


def test_codec_round_trip_and_metric_labels() -> None:
    data = load("spark-4.3.0", "stream_join")
    plan = map_plan(RawPlan.from_dict(data["raw"]), data["operators"], read_at=1.5)
    assert plan_from_dict(json.loads(json.dumps(plan_to_dict(plan)))) == plan
    values = dict(zip(OPERATOR_IDENTITY_LABELS, label_values(plan.operators[0], plan.source),
                      strict=True))
    assert values == {
        "kind": "stream_stream_join",
        "operator_id": "0",
        "keys": "key",
        "output_mode": "append",
        "watermark_column": "ts",
        "watermark_delay_seconds": "5",
        "state_store_provider": "rocksdb",
        "num_state_stores": "2",
        "checkpoint_location": "file:/tmp/sparkwatch-plans/stream_join/checkpoint/state/0",
        "source": "plan",
    }
    assert summary(plan.operators[0]) == (
        "stream_stream_join on [key], append, watermark ts 5s, 2 stores, rocksdb"
    )


def test_raw_plan_round_trip() -> None:
    raw = RawPlan.from_dict(load("spark-3.5.9", "window_agg")["raw"])
    assert RawPlan.from_dict(raw.to_dict()) == raw
