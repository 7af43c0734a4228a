"""`sparkwatch state CHECKPOINT`: what a streaming checkpoint's state holds (Spark 4.0+)."""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

from sparkwatch.cli.errors import CliError
from sparkwatch.cli.numbers import MAX_INT32, MAX_INT64, int_between, shown

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
    parser.add_argument("checkpoint", type=checkpoint_location, metavar="CHECKPOINT",
                        help="checkpoint location: a local path or any Hadoop-compatible URI")
    # Spark's operator ids and limit() are 32-bit ints, batch ids 64-bit longs: a number past
    # them came back as a JVM error that named neither the option nor the number's fault.
    parser.add_argument("--operator", type=int_between(0, MAX_INT32), metavar="ID",
                        help="only this operator id")
    parser.add_argument("--store", "--state-var", dest="store", metavar="NAME",
                        help="only this store (e.g. left-keyToNumValues) or transformWithState "
                        "state variable")
    parser.add_argument("--batch-id", type=int_between(0, MAX_INT64), metavar="N",
                        help="the state as of batch N (default: the latest committed)")
    parser.add_argument("--top", type=int_between(0, MAX_INT32), default=10, metavar="N",
                        help="largest keys to list per store (default 10)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--changes", type=batch_window, metavar="FROM..TO",
                        help="keys put and removed in batches FROM..TO (needs changelogs)")
    parser.set_defaults(func=run_state)


def checkpoint_location(text: str) -> str:
    """A checkpoint's path or URI, an argparse ``type``: '' was handed to Spark, which started
    (seconds) to say it "can not create a Path from an empty string"."""
    if not text.strip():
        raise argparse.ArgumentTypeError("empty: give a checkpoint's directory or URI")
    return text


def batch_window(text: str) -> tuple[int, int]:
    """``FROM..TO`` (batch ids, FROM <= TO) for ``--changes``, an argparse ``type``."""
    first, sep, last = (part.strip() for part in text.partition(".."))
    # isdecimal, not isdigit: int() refuses superscripts and other digits that are no decimals.
    if not sep or not first.isdecimal() or not last.isdecimal():
        raise argparse.ArgumentTypeError(
            f"wants FROM..TO batch ids, e.g. 3..7, not {shown(text)}")
    lo, hi = _batch_id(first), _batch_id(last)
    if lo > hi:
        raise argparse.ArgumentTypeError(f"FROM must not be after TO ({lo} > {hi})")
    return lo, hi


def _batch_id(digits: str) -> int:
    # Length first: int() refuses over 4300 digits with a message of its own.
    if len(digits.lstrip("0")) > len(str(MAX_INT64)) or int(digits) > MAX_INT64:
        raise argparse.ArgumentTypeError(f"batch ids must be at most {MAX_INT64}")
    return int(digits)


def request(args: argparse.Namespace) -> Request:
    from sparkwatch.state.inspect import Request

    return Request(args.checkpoint, args.operator, args.store, args.batch_id, args.top,
                   args.changes)


@contextmanager
def spark_for_state() -> Iterator[SparkSession]:
    """A local session to read state with, stopped afterwards; state errors as CLI errors."""
    from sparkwatch.state.source import StateError, require_spark_4

    try:
        import pyspark
    except ImportError:
        raise CliError("reading state needs PySpark 4.0 or later: pip install "
                       "'sparkwatch[spark]'") from None
    from sparkwatch.state.session import build_session

    # py4j logs every closed connection at INFO; the report is the output.
    logging.getLogger("py4j").setLevel(logging.WARNING)

    # SIGTERM ends a read like Ctrl-C (sparkwatch.cli.signals): Spark stopped below, exit 143.
    try:
        require_spark_4(pyspark.__version__)
        # In a process that already runs Spark (a notebook, a test) use its session, and leave
        # it running.
        existing = running_session()
        spark = existing or build_session()
        interrupted = False
        try:
            yield spark
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            if existing is None:
                stop_session(spark, quietly=interrupted)
    except StateError as exc:
        raise CliError(str(exc)) from None


def running_session() -> SparkSession | None:
    """The session of a SparkContext this process already runs, whichever thread started it;
    None if none runs. Not ``getActiveSession()`` alone: that is the calling thread's (its JVM
    thread's), None in another thread and in the same thread once an interrupted Py4J call has
    given it a new connection, and the builder then handed back the caller's session, which the
    read stopped: the suite's shared session, under the test that read the state, and every
    later Spark test of that worker failed ("Cannot call methods on a stopped SparkContext")."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None or SparkContext._active_spark_context is None:
        return active
    # With a SparkContext up, the builder with no options of its own returns its session.
    return SparkSession.builder.getOrCreate()


def stop_session(spark: SparkSession, quietly: bool) -> None:
    """``spark.stop()``; ``quietly`` after a signal: what the stop cuts short (tasks, broadcasts)
    logs ERRORs, and a JVM already ending (Ctrl-C reaches its process group) makes PySpark warn
    that it cannot shut it down cleanly. The exit status says the command was stopped."""
    if not quietly:
        spark.stop()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with suppress(Exception):
            spark.sparkContext.setLogLevel("OFF")
        spark.stop()


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
