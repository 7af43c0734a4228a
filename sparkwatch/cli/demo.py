"""`sparkwatch demo`: stateful streaming queries on a local Spark, watched live by sparkwatch.

Everything that can be wrong with the arguments (a taken port, an unreachable history database)
is checked before Spark starts, so those errors come in a second instead of after ten. PySpark
and SQLAlchemy are imported inside the command, to keep ``sparkwatch --help`` fast.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from sparkwatch.cli.db import durable_history_url
from sparkwatch.cli.errors import CliError
from sparkwatch.cli.numbers import shown
from sparkwatch.settings import (
    DEFAULT_HISTORY_URL,
    DEFAULT_METRICS_PORT,
    SettingsError,
    load_listener_settings,
)
from sparkwatch.settings.cli import DEMO_HISTORY_URL
from sparkwatch.settings.listener import BY_NAME as LISTENER
from sparkwatch.settings.options import add_option, origin
from sparkwatch.settings.parsers import directory
from sparkwatch.settings.spec import SHOWN_CHARS
from sparkwatch.summary import cut

if TYPE_CHECKING:
    from sparkwatch.demo.runner import DemoOptions

MAX_ROWS_PER_SECOND = 1000


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "demo",
        help="run stateful streaming queries locally and watch their state live",
        description="Start a local Spark with one streaming query per kind of state operator, "
        "attach sparkwatch (serving /metrics, writing the history) and show a live table.",
    )
    parser.add_argument("--duration", type=_positive_float, metavar="SECONDS",
                        help="stop after this many seconds (default: run until Ctrl-C)")
    parser.add_argument("--port", type=_port, default=DEFAULT_METRICS_PORT,
                        help=f"port of /metrics (default {DEFAULT_METRICS_PORT}; 0: any free port)")
    add_option(parser, DEMO_HISTORY_URL)
    parser.add_argument("--state-store", choices=("rocksdb", "hdfs"), default="rocksdb",
                        help="state store provider (default rocksdb: it reports RocksDB metrics)")
    parser.add_argument("--rows-per-second", type=_rows_per_second, default=10, metavar="N",
                        help="rows per second of each rate source (default 10)")
    parser.add_argument("--checkpoint-dir", type=_directory, metavar="DIR",
                        help="keep checkpoints here, to resume (default: a temporary directory)")
    parser.add_argument("--collector", action="store_true",
                        help="push the events to a local collector (started for the demo on "
                        "127.0.0.1:9751), which serves /metrics and writes the history")
    parser.set_defaults(func=run)


MAX_DURATION_SECONDS = 7 * 86_400.0
"""A week: 'inf' (or 1e308) got past the check and failed once Spark was up."""


def _positive_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {shown(raw)}") from None
    if not 0 < value <= MAX_DURATION_SECONDS:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most {MAX_DURATION_SECONDS:g} s (a week): {shown(raw)}")
    return value


def _port(raw: str) -> int:
    value = _small_whole(raw, 5)
    if value is None or value > 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0-65535): {shown(raw)}")
    return value


def _rows_per_second(raw: str) -> int:
    value = _small_whole(raw, 4)
    if value is None or not 1 <= value <= MAX_ROWS_PER_SECOND:
        raise argparse.ArgumentTypeError(
            f"expected 1-{MAX_ROWS_PER_SECOND} (two cores run eight queries): {shown(raw)}"
        )
    return value


def _small_whole(raw: str, digits: int) -> int | None:
    """``raw`` as a whole number of at most ``digits`` digits (leading zeros aside), else None:
    int() refuses a string of over 4300 digits, and argparse's own message for that quoted the
    whole value (100 KB on one line)."""
    significant = raw.lstrip("0")
    if not (raw.isascii() and raw.isdigit()) or len(significant) > digits:
        return None
    return int(significant or "0")


def _directory(raw: str) -> Path:
    try:
        return directory(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def make_checkpoint_dir(path: Path) -> None:
    """Made (or found) before Spark starts: a file in its place, or a directory that cannot be
    made or written, failed once the queries started, with a traceback."""
    named = cut(str(path), SHOWN_CHARS)  # the path as given, cut: a mistaken one may be huge
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CliError(f"--checkpoint-dir: {named} exists and is not a directory") from None
    except OSError as exc:
        raise CliError(f"--checkpoint-dir: cannot make {named}: {exc.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CliError(f"--checkpoint-dir: {named} is not writable")


def history_url(given: str | None) -> str | None:
    """The history URL: --history-url (by default the listener's env var), else the default;
    'off' → None."""
    return DEFAULT_HISTORY_URL if given is None else DEMO_HISTORY_URL.parse(given)


def check_port(address: str, port: int) -> None:
    """Fail now if /metrics could not bind later (the server binds with SO_REUSEADDR too, so a
    port only in TIME_WAIT is not reported as taken)."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CliError(f"cannot serve /metrics on {address!r}: {exc.strerror}") from None
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"port {port} is already in use; choose another with --port "
                    "(0 picks a free port)"
                ) from None
            raise CliError(f"cannot serve /metrics on {address}:{port}: {exc.strerror}") from None


def check_history(url: str, origin: str) -> None:
    """Connect once, so a wrong URL or a database that is down is reported before Spark starts."""
    from sparkwatch.history.engine import connect, create_engine
    from sparkwatch.history.errors import HistoryError

    try:
        engine = create_engine(url)
        try:
            with connect(engine):
                pass
        finally:
            engine.dispose()
    except HistoryError as exc:
        raise CliError(f"{origin}: {exc}") from None


def quiet_libraries(verbose: bool) -> None:
    # py4j (callback server) and Alembic (the history's schema upgrade) log at INFO while the
    # live table is up, writing over it.
    if not verbose:
        for name in ("py4j", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)


def preflight(args: argparse.Namespace, env: Mapping[str, str]) -> DemoOptions:
    """Check everything that can be checked without Spark; the demo's options."""
    from sparkwatch.demo.runner import DemoOptions

    url = history_url(args.history_url)
    try:
        settings = load_listener_settings(env, metrics_port=args.port, history_url=url)
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    if settings.metrics_enabled:
        check_port(settings.metrics_address, args.port)
    if url is not None:
        named = origin(args.history_url, str(DEMO_HISTORY_URL.flag))
        check_history(durable_history_url(url, named), named)
    if args.checkpoint_dir is not None:
        make_checkpoint_dir(args.checkpoint_dir)
    wildcard = settings.metrics_address in ("0.0.0.0", "::", "")  # nosec B104 - a test, no bind
    return DemoOptions(
        port=args.port, history_url=url, state_store=args.state_store,
        rows_per_second=args.rows_per_second, duration=args.duration,
        checkpoint_dir=args.checkpoint_dir,
        metrics_host="127.0.0.1" if wildcard else settings.metrics_address,
    )


def run(args: argparse.Namespace) -> int:
    began = time.monotonic()
    try:
        import pyspark  # noqa: F401 - only to give a clear error
    except ImportError:
        raise CliError("the demo needs PySpark: pip install 'sparkwatch[demo]'") from None
    from sparkwatch.demo.runner import DemoError, run_demo

    opts = preflight(args, os.environ)  # the listener's settings, read here once
    quiet_libraries(getattr(args, "verbose", False))
    try:
        if getattr(args, "collector", False):
            return run_with_collector(opts, began)
        return run_demo(opts, sys.stdout, began=began)
    except DemoError as exc:
        raise CliError(str(exc)) from None


def run_with_collector(opts: DemoOptions, began: float) -> int:
    """The demo pushing to a real local collector process, which writes the history instead of
    the listener; the listener reads the push settings from the environment, as apps do."""
    from dataclasses import replace

    from sparkwatch.collector.config import DEFAULT_PORT
    from sparkwatch.collector.local import LocalCollectorError, local_collector
    from sparkwatch.demo.runner import run_demo

    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(("127.0.0.1", DEFAULT_PORT))
        except OSError:
            raise CliError(f"port {DEFAULT_PORT} for the demo's collector is in use (is a "
                           "collector already running?)") from None
    try:
        with local_collector(opts.history_url, DEFAULT_PORT) as collector:
            print(f"collector: {collector.url}/metrics, history: "
                  f"{describe(opts.history_url)}", flush=True)
            # The demo's driver runs in this process: its listener reads these at attach.
            os.environ[LISTENER["push_url"].env] = collector.ingest_url
            os.environ[LISTENER["push_token"].env] = collector.token
            return run_demo(replace(opts, history_url=None), sys.stdout, began=began)
    except LocalCollectorError as exc:
        raise CliError(str(exc)) from None


def describe(url: str | None) -> str:
    from sparkwatch.history.engine import describe_url

    return describe_url(url) if url else "off"
