"""The demo's local Spark session: small, quiet, and with a selectable state store provider."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROVIDER_CONF = "spark.sql.streaming.stateStore.providerClass"
STATE_STORES: dict[str, str] = {
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
}

DEMO_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    # Changelog checkpointing commits a small delta per batch instead of uploading RocksDB
    # files every batch: measured 435 vs 595 CPU-ms per micro-batch with all demo queries.
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # The demo runs for minutes, not days: keep fewer state versions so cleanup stays cheap.
    "spark.sql.streaming.minBatchesToRetain": "20",
    # Client-compiler JIT only and a single-threaded GC: on two cores the JVM's own background
    # threads (C2 compilation, parallel GC) compete with the queries. Measured with all demo
    # queries: 238 vs 435 CPU-ms per micro-batch.
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def build_session(state_store: str = "rocksdb", app_name: str = "sparkwatch-demo") -> SparkSession:
    """A ``local[2]`` session sized for a laptop: 2 shuffle partitions keep every batch at two
    state-store tasks per operator, which is what lets eight stateful queries share two cores."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python UDF workers (applyInPandasWithState, transformWithStateInPandas) must run this
    # interpreter, the one that has pandas and pyarrow.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from sparkwatch.jvm import session_alone

    # The live table owns the terminal: quiet but for errors (session_alone), as Spark's WARNs
    # (e.g. "falling behind") would tear it.
    return session_alone({**DEMO_CONF, PROVIDER_CONF: STATE_STORES[state_store],
                          "spark.master": "local[2]", "spark.app.name": app_name})


@contextlib.contextmanager
def jvm_output_to(path: Path) -> Iterator[None]:
    """Start the JVM inside this block with its stdout and stderr in ``path``; ours come back
    after it.

    The JVM inherits the file descriptors of the process that launches it, and Spark copies the
    output of the Python workers it starts to its own stderr: PySpark's transformWithStateInPandas
    driver worker prints four lines per query start, which would tear the live table. The
    descriptors are swapped, not ``sys.stderr``, because the JVM only sees descriptors."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (log, *saved):
            os.close(fd)


def spark_version(spark: SparkSession) -> tuple[int, int]:
    major, minor = spark.version.split(".")[:2]
    return int(major), int(minor)


@contextlib.contextmanager
def session_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """Set a SQL conf for the queries started inside the block.

    A streaming query clones the session when it starts, so the value sticks to the queries
    started here and the session gets its old value back afterwards.
    """
    old = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if old is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, old)
