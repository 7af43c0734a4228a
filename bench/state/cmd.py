"""``python -m bench state``: inspect a checkpoint holding N state rows (default 1 million) with
`sparkwatch state` and time it; the driver memory is bounded by spark.driver.memory."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import ROOT, machine
from bench.record import write_block

DOC = ROOT / "docs" / "benchmarks.md"
GOAL_SECONDS = 60.0
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def log(message: str) -> None:
    print(f"[bench state {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="state rows to build")
    p.add_argument("--partitions", type=int, default=8, help="state partitions")
    p.add_argument("--record", action="store_true", help="write the figures to docs/benchmarks.md")


def build_checkpoint(root: Path, rows: int, partitions: int) -> dict[str, Any]:
    """One micro-batch of an aggregation over ``rows`` distinct keys (RocksDB): ``rows`` state
    rows; returns the query's last progress."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[2]").appName("bench-state-build")
        .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .getOrCreate()
    )
    try:
        spark.range(rows).select(F.col("id").alias("customer"), (F.col("id") % 97).alias("v")) \
            .write.parquet(str(root / "in"))
        stream = spark.readStream.schema("customer LONG, v LONG").parquet(str(root / "in"))
        query = (
            stream.groupBy("customer").agg(F.sum("v").alias("total")).writeStream.format("noop")
            .outputMode("update").option("checkpointLocation", str(root / "checkpoint"))
            .trigger(availableNow=True).start()
        )
        query.awaitTermination()
        progress: Any = query.lastProgress
        assert progress is not None, "the build query ran no batch"
        return json.loads(progress.json) if hasattr(progress, "json") else dict(progress)
    finally:
        spark.stop()


def inspect_timed(checkpoint: Path) -> tuple[float, dict[str, Any], int]:
    """Wall seconds of the whole command (JVM start included), its report, max child RSS KiB."""
    command = [sys.executable, "-m", "sparkwatch.cli.main", "state", str(checkpoint),
               "--format", "json", "--top", "10"]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds = time.monotonic() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, json.loads(done.stdout), rss


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="bench-state-") as tmp:
        root = Path(tmp)
        log(f"building a checkpoint with {ns.rows:,} state rows")
        progress = build_checkpoint(root, ns.rows, ns.partitions)
        spark_rows = progress["stateOperators"][0]["numRowsTotal"]
        load_before = os.getloadavg()[0]
        log("inspecting")
        seconds, report, rss_kib = inspect_timed(root / "checkpoint")
        load_after = os.getloadavg()[0]
    [op] = report["operators"]
    assert op["rows"] == spark_rows == ns.rows, (op["rows"], spark_rows)
    info = machine.describe()
    body = "\n".join([
        f"- `python -m bench state --rows {ns.rows}`: `sparkwatch state CHECKPOINT --format json "
        f"--top 10` on an aggregation's RocksDB checkpoint of {ns.rows:,} state rows in "
        f"{ns.partitions} partitions ({op['bytes']:,} bytes as JSON)",
        f"- **{seconds:.1f} s** wall for the whole command, JVM start included (goal < "
        f"{GOAL_SECONDS:.0f} s: {'met' if seconds < GOAL_SECONDS else 'missed'}); rows reported "
        f"{op['rows']:,} = the query's numRowsTotal",
        f"- driver: spark.driver.memory=1g (only one row per partition and 10 keys are "
        f"collected); largest child process RSS (RUSAGE_CHILDREN) {rss_kib / 1024:.0f} MiB",
        f"- machine: {info['nproc']} cores, {info['ram']}, {info['cpu']}, Java {info['java']}, "
        f"code {info['code']}; 1-min load average {load_before:.1f} before, {load_after:.1f} "
        f"after (other processes included)",
    ])
    print(body)
    if ns.record:
        write_block(DOC, "state", "State contents: `sparkwatch state` on 1 million rows", body)
    return 0 if seconds < GOAL_SECONDS else 1
