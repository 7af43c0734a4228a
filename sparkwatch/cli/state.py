"""`sparkwatch state CHECKPOINT`: what a streaming checkpoint's state holds (Spark 4.0+)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from sparkwatch.cli.errors import CliError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkwatch.state.inspect import Request
    from sparkwatch.state.model import StateReport


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "state",
        help="read a checkpoint's state: stores, rows and bytes per partition, top keys",
        description="Read a streaming checkpoint's state with Spark's State Data Source "
        "(Spark 4.0+), read-only. Aggregates run in Spark; only the results reach this process.",
    )
    parser.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="checkpoint location: a local path or any Hadoop-compatible URI")
    parser.add_argument("--operator", type=int, metavar="ID", help="only this operator id")
    parser.add_argument("--store", "--state-var", dest="store", metavar="NAME",
                        help="only this store (e.g. left-keyToNumValues) or transformWithState "
                        "state variable")
    parser.add_argument("--batch-id", type=int, metavar="N",
                        help="the state as of batch N (default: the latest committed)")
    parser.add_argument("--top", type=int, default=10, metavar="N",
                        help="largest keys to list per store (default 10)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--changes", metavar="FROM..TO",
                        help="keys put and removed in batches FROM..TO (needs changelogs)")
    parser.set_defaults(func=run_state)


def request(args: argparse.Namespace) -> Request:
    from sparkwatch.state.changes import parse_range
    from sparkwatch.state.inspect import Request

    if args.top < 0:
        raise CliError("--top must be 0 or more")
    if args.batch_id is not None and args.batch_id < 0:
        raise CliError("--batch-id must be 0 or more")
    try:
        window = parse_range(args.changes) if args.changes else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return Request(args.checkpoint, args.operator, args.store, args.batch_id, args.top, window)


@contextmanager
def spark_for_state() -> Iterator[SparkSession]:
    """A local session to read state with, stopped afterwards; state errors as CLI errors."""
    from sparkwatch.state.source import StateError, require_spark_4

    try:
        import pyspark
    except ImportError:
        raise CliError("reading state needs PySpark 4.0 or later: pip install "
                       "'sparkwatch[spark]'") from None
    from pyspark.sql import SparkSession

    from sparkwatch.state.session import build_session

    # py4j logs every closed connection at INFO; the report is the output.
    logging.getLogger("py4j").setLevel(logging.WARNING)

    # SIGTERM ends a read like Ctrl-C (sparkwatch.cli.signals): Spark stopped below, exit 143.
    try:
        require_spark_4(pyspark.__version__)
        # In a process that already runs Spark (a notebook, a test) use its session, and leave
        # it running.
        existing = SparkSession.getActiveSession()
        spark = existing or build_session()
        try:
            yield spark
        finally:
            if existing is None:
                spark.stop()
    except StateError as exc:
        raise CliError(str(exc)) from None


def read_state(req: Request) -> StateReport:
    from sparkwatch.state.inspect import inspect
    from sparkwatch.state.progress import progress

    with spark_for_state() as spark:
        return inspect(spark, req, lambda label: progress(spark, label))


def run_state(args: argparse.Namespace) -> int:
    from sparkwatch.state.render import to_json, to_text

    report = read_state(request(args))
    print(to_json(report) if args.format == "json" else to_text(report))
    sys.stdout.flush()
    return 0
