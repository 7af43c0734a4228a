"""`sparkwatch state` on real checkpoints (Spark 4.x): every operator kind on the HDFS and the
RocksDB provider, read without changing a byte; totals agree with the query's own progress."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.cli.main import main
from sparkwatch.state.inspect import Request, inspect
from sparkwatch.state.model import StateReport
from tests.state_support import HOT, PROVIDERS, finish, start, tree_hash
from tests.workloads import WORKLOADS, installed_spark_version, supported

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(installed_spark_version() < (4, 0), reason="the State Data Source is 4.0+"),
]

RUNS = [
    (kind, provider)
    for kind in supported()
    for provider in PROVIDERS
    # transformWithState refuses any provider but RocksDB.
    if not (kind == "transform_with_state" and provider == "hdfs")
]


def _run_all(spark: Any, mktemp: Callable[[str], Path]) -> dict[tuple[str, str], dict[str, Any]]:
    """The JVM-only queries together, the Python-worker ones one at a time (on two cores a crowd
    of Python workers misses Spark's connect-back timeout)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    jvm = [r for r in RUNS if not WORKLOADS[r[0]].python_worker]
    for wave in [jvm] + [[r] for r in RUNS if WORKLOADS[r[0]].python_worker]:
        roots = {r: mktemp(f"{r[0]}-{r[1]}") for r in wave}
        started = {r: start(spark, *r, roots[r]) for r in wave}
        for r, query in started.items():
            checkpoint = roots[r] / "checkpoint"
            out[r] = {"progress": finish(query), "checkpoint": checkpoint,
                      "before": tree_hash(checkpoint)}
    return out


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    found = _run_all(spark, lambda name: tmp_path_factory.mktemp(name))
    for run in found.values():
        run["report"] = inspect(spark, Request(str(run["checkpoint"]), top=3))
    return found


@pytest.mark.parametrize(("kind", "provider"), RUNS, ids=[f"{k}-{p}" for k, p in RUNS])
def test_state_agrees_with_the_query_and_finds_the_hot_key(runs, kind: str, provider: str) -> None:
    run = runs[(kind, provider)]
    report: StateReport = run["report"]
    [op] = report.operators
    [spark_op] = run["progress"]["stateOperators"]
    assert report.batch_id == run["progress"]["batchId"]
    assert op.operator_name == spark_op["operatorName"]
    # op.rows is the partitions' rows summed over its stores: this is "per-partition rows sum
    # to Spark's own total"
    assert op.rows == spark_op["numRowsTotal"] > 0
    for store in op.stores:
        assert len(store.partitions) == store.target.partitions == 2
        assert store.key_schema.startswith("struct<")
    if kind == "stream_join":
        assert sorted(s.target.store_name for s in op.stores) == [
            "left-keyToNumValues", "left-keyWithIndexToValue",
            "right-keyToNumValues", "right-keyWithIndexToValue",
        ]
    if kind == "transform_with_state":
        assert [s.target.state_var for s in op.stores] == ["seen"]
    if kind != "global_limit":  # the limit keeps one row under an empty key: nothing to rank
        for store in op.stores:
            assert HOT in json.loads(store.top_keys[0].key).values(), store.top_keys
    assert tree_hash(run["checkpoint"]) == run["before"], "reading state changed the checkpoint"


def test_the_command_prints_the_json_report(runs, capsys) -> None:
    run = runs[("window_agg", "rocksdb")]
    assert main(["state", str(run["checkpoint"]), "--format", "json", "--top", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    [op] = data["operators"]
    [store] = op["stores"]
    assert (data["schema_version"], op["operator_name"]) == (1, "stateStoreSave")
    assert op["rows"] == run["progress"]["stateOperators"][0]["numRowsTotal"]
    assert store["top_keys_by"] == ["key"] and store["time_field"] == "window"
    assert json.loads(store["top_keys"][0]["key"]) == {"key": HOT}
    assert store["rows_behind_watermark"] == 0
    assert sum(p["rows"] for p in store["partitions"]) == op["rows"]  # one store: Spark's total
    assert tree_hash(run["checkpoint"]) == run["before"]


def test_the_table_names_stores_and_keys(runs, capsys) -> None:
    run = runs[("stream_join", "hdfs")]
    assert main(["state", str(run["checkpoint"]), "--store", "left-keyWithIndexToValue"]) == 0
    out = capsys.readouterr().out
    assert "operator 0 symmetricHashJoin" in out
    assert "store left-keyWithIndexToValue" in out and "right-" not in out
    assert f'{{"field0":"{HOT}"}}' in out and "grouped by field0" in out


def test_an_unknown_store_names_the_ones_there(runs, capsys) -> None:
    run = runs[("dedupe", "hdfs")]
    assert main(["state", str(run["checkpoint"]), "--store", "nope"]) == 2
    assert "the checkpoint has 0:default" in capsys.readouterr().err


def test_a_path_without_a_checkpoint_is_a_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["state", str(tmp_path / "missing"), "--format", "json"]) == 2
    assert "sparkwatch state: error:" in capsys.readouterr().err
