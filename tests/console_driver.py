"""A second real Spark driver (its own JVM and SparkSession) for the console tests: it runs one
stateful query under its own app name, sends its batches to a collector (``push``, for
test_console_collector) or writes them to a history (``history``, for test_console_restart, as a
driver that is later restarted), then stops.

Prints one JSON line: the query and run ids, how many batches it ran, and whether they were
flushed.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import sparkwatch
from bench.local import local_spark

BATCHES = 3


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.console_driver")
    parser.add_argument("app_name", help="the app's name; the query is named <app_name>_dedupe")
    parser.add_argument("checkpoint", help="the query's checkpoint directory")
    sinks = parser.add_subparsers(dest="sink", required=True)
    push = sinks.add_parser("push", help="push the batches to a collector")
    push.add_argument("url", help="the collector's ingest URL")
    push.add_argument("token", help="the collector's ingest token")
    history = sinks.add_parser("history", help="write the batches to a history")
    history.add_argument("url", help="the history's database URL")
    return parser.parse_args()


def _sink(args: argparse.Namespace) -> dict[str, Any]:
    if args.sink == "push":
        return {"history_url": "off", "push_url": args.url, "push_token": args.token,
                "push_flush_seconds": 0.2}
    return {"history_url": args.url, "history_flush_seconds": 0.2}


def main() -> None:
    args = _arguments()
    spark = local_spark(args.app_name, {"spark.ui.enabled": "false"})
    att = sparkwatch.attach(spark, metrics_enabled=False, app_name=args.app_name, **_sink(args))
    query = (spark.readStream.format("rate").option("rowsPerSecond", 5).load()
             .withWatermark("timestamp", "5 seconds").dropDuplicates(["value", "timestamp"])
             .writeStream.format("noop").queryName(f"{args.app_name}_dedupe")
             .trigger(processingTime="1 second").option("checkpointLocation", args.checkpoint)
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
