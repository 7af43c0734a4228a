"""Deterministic stateful queries for integration tests: one per operator kind, on file sources.

Each query reads JSON-lines files written here (one file per micro-batch, ``maxFilesPerTrigger=1``)
and runs with ``trigger(availableNow=True)``: it ends by itself and its ``lastProgress`` is final.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = "ts TIMESTAMP, key STRING, v LONG"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def write_batches(directory: Path, batches: int, rows: int, step_seconds: int = 4) -> None:
    """Files of events whose event time advances batch by batch, with late rows and repeats."""
    directory.mkdir(parents=True, exist_ok=True)
    for b in range(batches):
        lines = []
        for i in range(rows):
            ts = EPOCH + timedelta(seconds=b * step_seconds + i % step_seconds)
            lines.append({"ts": ts.isoformat(), "key": f"k{i % 3}", "v": i % 5})
        if b >= 2:  # late rows, behind any sane watermark: dropped by watermark-aware operators
            lines.append({"ts": EPOCH.isoformat(), "key": "late", "v": 0})
        body = "\n".join(json.dumps(line) for line in lines)
        (directory / f"part-{b:04d}.json").write_text(body + "\n")


def _stream(spark: Any, directory: Path) -> Any:
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(directory))


@dataclass(frozen=True)
class Workload:
    kind: str
    """the operatorName Spark reports for the query's (first) state operator"""
    build: Callable[[Any, Path], Any]
    output_mode: str
    provider: str = HDFS
    inputs: tuple[str, ...] = ("in",)
    min_spark: tuple[int, int] = (3, 5)
    python_worker: bool = False

    def operator_name(self, spark_version: tuple[int, int]) -> str:
        """What Spark calls the operator: 3.5 reports session windows as ``defaultName``."""
        if self.kind == "sessionWindowStateStoreSaveExec" and spark_version < (4, 0):
            return "defaultName"
        return self.kind


def window_agg(spark: Any, root: Path) -> Any:
    from pyspark.sql import functions as F

    df = _stream(spark, root / "in").withWatermark("ts", "5 seconds")
    return df.groupBy(F.window("ts", "4 seconds"), "key").agg(F.count("*").alias("n"))


def dedupe(spark: Any, root: Path) -> Any:
    return (
        _stream(spark, root / "in").withWatermark("ts", "5 seconds").dropDuplicates(["key", "ts"])
    )


def dedupe_within_watermark(spark: Any, root: Path) -> Any:
    df = _stream(spark, root / "in").withWatermark("ts", "5 seconds")
    return df.dropDuplicatesWithinWatermark(["key", "v"])


def session_window(spark: Any, root: Path) -> Any:
    from pyspark.sql import functions as F

    df = _stream(spark, root / "in").withWatermark("ts", "5 seconds")
    return df.groupBy(F.session_window("ts", "3 seconds"), "key").agg(F.count("*").alias("n"))


def stream_join(spark: Any, root: Path) -> Any:
    from pyspark.sql import functions as F

    left = _stream(spark, root / "left").withWatermark("ts", "5 seconds").alias("l")
    right = _stream(spark, root / "right").withWatermark("ts", "5 seconds").alias("r")
    cond = F.expr("l.key = r.key AND r.ts BETWEEN l.ts AND l.ts + interval 2 seconds")
    return left.join(right, cond).select("l.key", "l.ts", "r.v")


def global_limit(spark: Any, root: Path) -> Any:
    return _stream(spark, root / "in").limit(25)


def apply_in_pandas_with_state(spark: Any, root: Path) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    def count(key: Any, pdfs: Any, state: Any) -> Any:
        import pandas as pd

        total = state.get[0] if state.exists else 0
        for pdf in pdfs:
            total += len(pdf)
        state.update((total,))
        yield pd.DataFrame({"key": [key[0]], "n": [total]})

    return (
        _stream(spark, root / "in")
        .groupBy("key")
        .applyInPandasWithState(
            count, "key STRING, n LONG", "n LONG", "Update", GroupStateTimeout.NoTimeout
        )
    )


def transform_with_state(spark: Any, root: Path) -> Any:
    from sparkwatch.demo.processor import CountPerUser

    df = _stream(spark, root / "in").withColumnRenamed("key", "user").select("user")
    return df.groupBy("user").transformWithStateInPandas(
        statefulProcessor=CountPerUser(),
        outputStructType="user STRING, seen LONG",
        outputMode="Update",
        timeMode="None",
    )


WORKLOADS: dict[str, Workload] = {
    w.build.__name__: w
    for w in (
        Workload("stateStoreSave", window_agg, "append"),
        Workload("dedupe", dedupe, "append", ROCKSDB),
        Workload("dedupeWithinWatermark", dedupe_within_watermark, "append"),
        Workload("sessionWindowStateStoreSaveExec", session_window, "append", ROCKSDB),
        Workload("symmetricHashJoin", stream_join, "append", ROCKSDB, ("left", "right")),
        Workload("globalLimit", global_limit, "append"),
        Workload(
            "applyInPandasWithState", apply_in_pandas_with_state, "update", python_worker=True
        ),
        Workload(
            "transformWithStateInPandasExec",
            transform_with_state,
            "update",
            ROCKSDB,
            min_spark=(4, 0),
            python_worker=True,
        ),
    )
}


def installed_spark_version() -> tuple[int, int]:
    """PySpark's version without starting Spark (for parametrising tests at collection)."""
    try:
        import pyspark
    except ImportError:
        return (0, 0)
    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def supported() -> list[str]:
    """Workloads the installed Spark can run (transformWithState needs 4.0)."""
    version = installed_spark_version()
    return [name for name, w in WORKLOADS.items() if version >= w.min_spark]


def start(spark: Any, name: str, root: Path) -> Any:
    """Write the inputs and start the workload; returns the running StreamingQuery."""
    w = WORKLOADS[name]
    for sub in w.inputs:
        write_batches(root / sub, batches=4, rows=12)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", w.provider)
    try:
        df = w.build(spark, root)
        return (
            df.writeStream.format("noop")
            .outputMode(w.output_mode)
            .queryName(name)
            .option("checkpointLocation", str(root / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")


def run_to_completion(spark: Any, names: list[str], mktemp: Any) -> dict[str, Any]:
    """Run workloads until each ends; the JVM-only ones together, Python-worker ones one at a time
    (on 2 cores a crowd of Python workers misses Spark's fixed 10 s connect-back timeout)."""
    queries: dict[str, Any] = {}
    jvm_only = [n for n in names if not WORKLOADS[n].python_worker]
    for wave in [jvm_only] + [[n] for n in names if WORKLOADS[n].python_worker]:
        started = {n: start(spark, n, mktemp(n)) for n in wave}
        for name, query in started.items():
            assert query.awaitTermination(180), f"{name} did not finish"
            assert query.exception() is None, f"{name} failed: {query.exception()}"
        queries.update(started)
    return queries


def progress_dicts(query: Any) -> list[dict[str, Any]]:
    """recentProgress as plain dicts on every PySpark version (4.x returns objects)."""
    out = []
    for p in query.recentProgress:
        out.append(json.loads(p.json) if hasattr(p, "json") else dict(p))
    return out
