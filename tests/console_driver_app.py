"""Run by test_console_collector in its own process: a second real Spark driver (its own JVM and
SparkSession) that pushes one stateful query to a collector under its own app name, then stops.

Arguments: push URL, ingest token, app name, checkpoint dir. Prints one JSON line: the query id
and how many batches it ran.
"""

from __future__ import annotations

import json
import sys
import time

import sparkwatch
from bench.local import local_spark

BATCHES = 3


def main() -> None:
    push_url, token, app_name, checkpoint = sys.argv[1:5]
    spark = local_spark(app_name, {"spark.ui.enabled": "false"})
    att = sparkwatch.attach(spark, metrics_enabled=False, history_url="off", push_url=push_url,
                            push_token=token, push_flush_seconds=0.2, app_name=app_name)
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .withWatermark("timestamp", "5 seconds").dropDuplicates(["value", "timestamp"])
             .writeStream.format("noop").queryName(f"{app_name}_dedupe")
             .trigger(processingTime="1 second").option("checkpointLocation", checkpoint)
             .start())
    deadline = time.monotonic() + 180
    while len(query.recentProgress) < BATCHES and time.monotonic() < deadline:
        query.awaitTermination(0.2)
    batches = len(query.recentProgress)
    query.stop()
    ok = att.flush(30)
    att.detach()
    spark.stop()
    print(json.dumps({"query_id": str(query.id), "batches": batches, "flushed": ok}))


if __name__ == "__main__":
    main()
