"""Run by test_spark_connect in its own process: a Spark Connect session with sparkwatch attached.

Prints one JSON line with what the listener saw and what the query itself reported.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

import sparkwatch
from tests.workloads import progress_dicts, write_batches


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.remote("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sparkwatch.appName", "connect_conf_name")  # read from the server
        .getOrCreate()
    )
    # The conf round trips the attach makes to the server, counted on the real client.
    conf_calls: list[list[str]] = []
    server_config = spark.client.config

    def counted(operation: Any) -> Any:
        asked = getattr(operation, str(operation.WhichOneof("op_type")))
        conf_calls.append([operation.WhichOneof("op_type"), *getattr(asked, "keys", [])])
        return server_config(operation)

    spark.client.config = counted
    att = sparkwatch.attach(spark, metrics_port=0, history_url=sys.argv[1])
    spark.client.config = server_config
    root = Path(tempfile.mkdtemp())
    write_batches(root / "in", batches=3, rows=10)
    df = spark.readStream.schema("ts TIMESTAMP, key STRING, v LONG").option(
        "maxFilesPerTrigger", 1).json(str(root / "in"))
    query = (
        df.withWatermark("ts", "5 seconds").groupBy(F.window("ts", "4 seconds"), "key").count()
        .writeStream.format("noop").outputMode("append").queryName("connect_agg")
        .option("checkpointLocation", str(root / "ckpt")).trigger(availableNow=True).start()
    )
    query.awaitTermination(120)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = att.state.query(att.app.id, str(query.id))
        if state is not None and not state.active:
            break
        time.sleep(0.05)
    att.flush(30)
    print(json.dumps({
        "mode": att.stats().mode,
        "conf_calls": conf_calls,
        "app_name": att.app.name,
        "received": att.stats().received,
        "query_id": str(query.id),
        "run_id": str(query.runId),
        "progress": progress_dicts(query),
        "exposition": generate_latest(att.registry).decode(),
    }))
    att.detach()
    spark.stop()


if __name__ == "__main__":
    main()
