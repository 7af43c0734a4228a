"""Checkpoints for the state tests: the workloads of tests/workloads.py (one per operator kind) on
inputs with a planted hot key, run to completion on the HDFS or the RocksDB provider.

The hot key owns most rows (a row per event time, window or join match) and has the longest name,
so it is the largest key of every store, including those keeping one row per key."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.workloads import EPOCH, HDFS, ROCKSDB, WORKLOADS, progress_dicts

HOT = "hot_customer_0001"
PROVIDERS = {"hdfs": HDFS, "rocksdb": ROCKSDB}
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
BATCHES = 3
ROWS = 16


def hot_rows(batch: int) -> list[dict[str, Any]]:
    """Three of four rows are the hot key's; the others are cold keys seen once."""
    rows = []
    for i in range(ROWS):
        ts = EPOCH + timedelta(seconds=batch * 4 + i % 4, milliseconds=i)
        key = HOT if i % 4 else f"k{batch}_{i}"
        rows.append({"ts": ts.isoformat(), "key": key, "v": i % 5})
    return rows


def write_input(directory: Path, batches: list[list[dict[str, Any]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for b, rows in enumerate(batches):
        path = directory / f"part-{b:04d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        # The file source reads files in modification-time order: make it the batch order.
        os.utime(path, (1_700_000_000 + b, 1_700_000_000 + b))


def start(spark: Any, kind: str, provider: str, root: Path, partitions: int = 2) -> Any:
    """Start ``kind`` on the inputs under ``root`` (the hot key's unless the test wrote them)."""
    w = WORKLOADS[kind]
    for sub in w.inputs:
        if not (root / sub).exists():
            write_input(root / sub, [hot_rows(b) for b in range(BATCHES)])
    conf = {
        "spark.sql.streaming.stateStore.providerClass": PROVIDERS[provider],
        CHANGELOG: "true",
        "spark.sql.shuffle.partitions": str(partitions),
    }
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        return (
            w.build(spark, root).writeStream.format("noop").outputMode(w.output_mode)
            .queryName(f"{kind}_{provider}")
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(availableNow=True).start()
        )
    finally:
        for k, v in old.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def finish(query: Any) -> dict[str, Any]:
    """Wait for the query to end; its last progress."""
    assert query.awaitTermination(240), f"{query.name} did not finish"
    assert query.exception() is None, f"{query.name} failed: {query.exception()}"
    return progress_dicts(query)[-1]


def tree_hash(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*")) if p.is_file()
    }
