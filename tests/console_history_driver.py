"""Run by test_console_restart in its own process: a real Spark driver (its own JVM) that writes
one stateful query's batches to a history, then stops, as a driver that is later restarted.

Arguments: history URL, checkpoint dir. Prints one JSON line: the query and run ids, and how many
batches it ran.
"""

from __future__ import annotations

import json
import sys
import time

import sparkwatch
from bench.local import local_spark

BATCHES = 3


def main() -> None:
    history_url, checkpoint = sys.argv[1:3]
    spark = local_spark("console-restart", {"spark.ui.enabled": "false"})
    att = sparkwatch.attach(spark, metrics_enabled=False, history_url=history_url,
                            history_flush_seconds=0.2)
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .withWatermark("timestamp", "5 seconds").dropDuplicates(["value", "timestamp"])
             .writeStream.format("noop").queryName("restarted_dedupe")
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
    print(json.dumps({"query_id": str(query.id), "run_id": str(query.runId),
                      "batches": batches, "flushed": ok}))


if __name__ == "__main__":
    main()
