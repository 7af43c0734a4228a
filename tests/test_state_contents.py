"""What the state holds over time (Spark 4.x): the change feed between two batches, and doctor's
findings from the contents of planted checkpoints (skew, a hot key, growth, rows the watermark
should have evicted)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.cli.main import main
from tests.state_support import HOT, finish, start, tree_hash, write_input
from tests.workloads import EPOCH, installed_spark_version, progress_dicts

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(installed_spark_version() < (4, 0), reason="the State Data Source is 4.0+"),
]


def row(key: str, seconds: float) -> dict[str, Any]:
    return {"ts": (EPOCH + timedelta(seconds=seconds)).isoformat(), "key": key, "v": 0}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("provider", ["hdfs", "rocksdb"])
def test_change_feed_lists_the_keys_written_and_expired(
    spark: Any, tmp_path: Path, provider: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """dropDuplicates on (key, ts) with a 5 s watermark: batch 1 writes c and d, batch 2 writes e
    with the watermark at 16 s, which evicts a and b (written in batch 0)."""
    write_input(tmp_path / "in", [[row("a", 0), row("b", 1)], [row("c", 20), row("d", 21)],
                                  [row("e", 40)]])
    query = start(spark, "dedupe", provider, tmp_path)
    finish(query)
    checkpoint = tmp_path / "checkpoint"
    before = tree_hash(checkpoint)
    code, data = run(capsys, "state", str(checkpoint), "--changes", "1..2", "--top", "50")
    assert code == 0
    # --batch-id: the state as of each batch equals that batch's own numRowsTotal.
    for progress in progress_dicts(query):
        code, old = run(capsys, "state", str(checkpoint), "--batch-id", str(progress["batchId"]))
        assert (code, old["batch_id"]) == (0, progress["batchId"])
        assert old["operators"][0]["rows"] == progress["stateOperators"][0]["numRowsTotal"]
    changes = data["operators"][0]["stores"][0]["changes"]
    put = sorted(json.loads(k)["key"] for k in changes["keys_put"])
    removed = sorted(json.loads(k)["key"] for k in changes["keys_removed"])
    assert (put, removed) == (["c", "d", "e"], ["a", "b"])
    assert (changes["puts"], changes["removes"]) == (3, 2)
    assert tree_hash(checkpoint) == before


def skewed_rows(batch: int) -> list[dict[str, Any]]:
    """200 rows a batch, three in four the hot key's, each at its own millisecond."""
    return [row(HOT if i % 4 else f"cold_{batch}_{i}", batch * 10 + i / 1000) for i in range(200)]


def join_forever(spark: Any, root: Path) -> Any:
    """A join on the key alone, without watermarks: state partitioned by the key, never evicted."""
    from pyspark.sql import functions as F

    from tests.workloads import _stream

    left = _stream(spark, root / "left").alias("l")
    right = _stream(spark, root / "right").alias("r")
    return left.join(right, F.expr("l.key = r.key")).select("l.key", "l.v", "r.v")


@pytest.fixture(scope="module")
def skewed(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A join over 8 partitions where one key owns three rows in four of each side."""
    from tests.workloads import WORKLOADS, Workload

    root = tmp_path_factory.mktemp("skewed")
    for side in ("left", "right"):
        write_input(root / side, [skewed_rows(b) for b in range(3)])
    WORKLOADS["join_forever"] = Workload("symmetricHashJoin", join_forever, "append",
                                         inputs=("left", "right"))
    try:
        finish(start(spark, "join_forever", "hdfs", root, partitions=8))
    finally:
        del WORKLOADS["join_forever"]
    return root / "checkpoint"


def test_doctor_names_the_skewed_partition_the_hot_key_and_the_growth(
    skewed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree_hash(skewed)
    code, data = run(capsys, "doctor", "--inspect-state", str(skewed))
    assert code == 1
    found = {(f["code"], f["numbers"]["store"]) for f in data["findings"]}
    rows = "left-keyWithIndexToValue"
    assert {("state-partition-skew", rows), ("state-hot-key", rows),
            ("state-growing-in-change-feed", rows)} <= found
    assert {code for code, _ in found} == {
        "state-partition-skew", "state-hot-key", "state-growing-in-change-feed"
    }

    def one(code: str) -> dict[str, Any]:
        return next(f for f in data["findings"]
                    if (f["code"], f["numbers"]["store"]) == (code, rows))

    hot = one("state-hot-key")
    assert json.loads(hot["numbers"]["key"]) == {"field0": HOT}
    assert hot["numbers"]["share_of_bytes"] > 0.7
    assert "owns" in hot["evidence"][1] and "Salt the key" in hot["fix"]
    skew = one("state-partition-skew")
    assert skew["numbers"]["skew_ratio"] >= 4
    assert f"largest partitions: {skew['numbers']['partitions'][0]} (" in skew["evidence"][1]
    growth = one("state-growing-in-change-feed")
    assert (growth["numbers"]["rows_from"], growth["numbers"]["rows_to"]) == (200, 600)
    assert data["checked_state"][0]["checkpoint"] == str(skewed)
    assert tree_hash(skewed) == before


def test_doctor_says_the_same_of_a_checkpoint_in_text(
    skewed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, data = run(capsys, "doctor", "--inspect-state", str(skewed))
    found = data["findings"]
    code = main(["doctor", "--inspect-state", str(skewed)])
    lines = capsys.readouterr().out.splitlines()
    assert code == 1
    assert lines[0] == f"checked the state of 1 checkpoint: {len(found)} warnings", lines[0]
    assert lines[1] == (f"  checkpoint (state of {skewed}): {len(found)} findings - 4 stores as "
                        f"of batch {data['checked_state'][0]['batch_id']}"), lines[1]
    heads = [line for line in lines if line.startswith("WARNING ")]
    assert [h.split(":")[0].split()[1] for h in heads] == [f["code"] for f in found]
    assert all(h.endswith(" [checkpoint, operator 0 symmetricHashJoin, batch 2]") for h in heads)
    evidence = [line for line in lines if line.startswith("        - ")]
    assert evidence == [f"        - {e}" for f in found for e in f["evidence"]]
    assert [line for line in lines if line.startswith("        fix: ")] == [
        f"        fix: {f['fix']}" for f in found]


def test_doctor_finds_windows_complete_mode_keeps_behind_the_watermark(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.workloads import WORKLOADS, Workload, window_agg

    write_input(tmp_path / "in", [[row("a", 0)], [row("a", 30)], [row("a", 60)]])
    WORKLOADS["window_agg_complete"] = Workload("stateStoreSave", window_agg, "complete")
    try:
        finish(start(spark, "window_agg_complete", "hdfs", tmp_path))
    finally:
        del WORKLOADS["window_agg_complete"]
    code, data = run(capsys, "doctor", "--inspect-state", str(tmp_path / "checkpoint"))
    [found] = data["findings"]
    assert found["code"] == "state-behind-watermark" and code == 1
    # The last batch ran with the watermark at 30 s - 5 s: the window [0 s, 4 s) ended before it.
    assert found["numbers"]["rows_behind_watermark"] == 1
    assert "complete mode keeps every group" in found["fix"]


def test_state_under_a_watermark_is_not_called_growing_before_it_could_evict(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three batches inside the watermark's delay: Spark has evicted nothing yet, by design. On
    a loaded machine the demo's dedupe and join ran three batches and were called growing."""
    write_input(tmp_path / "in", [[row(f"k{b}_{i}", b + i / 1000) for i in range(200)]
                                  for b in range(3)])
    finish(start(spark, "dedupe", "hdfs", tmp_path))
    code, data = run(capsys, "doctor", "--inspect-state", str(tmp_path / "checkpoint"))
    assert data["checked_state"][0]["batch_id"] in (2, 3)  # 3: the watermark's no-data batch
    assert (data["findings"], code) == ([], 0)
