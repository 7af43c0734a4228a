"""The ``sparkwatch`` command line: one sub-command per module, each with ``register()``."""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

from sparkwatch.cli.errors import CliError
from sparkwatch.cli.output import silence_stdout
from sparkwatch.cli.signals import (
    Py4JStopsUnlogged,
    children,
    end_descendants,
    interrupt_within,
    status_of,
    stop_with_exit_status,
)
from sparkwatch.logs import LOG_FORMAT, format_root_handlers
from sparkwatch.terminal import printable
from sparkwatch.version import __version__

# Each module defines register(subparsers) and sets a `func(args) -> int` default on its parser.
COMMAND_MODULES = (
    "sparkwatch.cli.demo",
    "sparkwatch.cli.history",
    "sparkwatch.cli.db",
    "sparkwatch.cli.collector",
    "sparkwatch.cli.quarantine",
    "sparkwatch.cli.dashboards",
    "sparkwatch.cli.rules",
    "sparkwatch.cli.doctor",
    "sparkwatch.cli.top",
    "sparkwatch.cli.run",
    "sparkwatch.cli.state",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparkwatch",
        description="Observability for Spark Structured Streaming state.",
    )
    parser.add_argument("--version", action="version", version=f"sparkwatch {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # First: a signal during the imports below (seconds for some commands) is a clean stop too.
    with stop_with_exit_status() as stop:
        # main() also runs inside processes with children of their own (a notebook's Spark JVM,
        # a test worker's): a stop ends what this command started, never those.
        spared: frozenset[int] = frozenset()
        try:
            spared = children()
            return stop.status(_main(argv, lambda: stop.signum is not None))
        except (KeyboardInterrupt, Exception) as exc:
            # Ctrl-C or SIGTERM (sparkwatch.cli.signals), itself or as the cause of what Python
            # made of it; any other exception goes on as it was.
            interrupt = interrupt_within(exc)
            if interrupt is None:
                raise
            end_descendants(spared)  # what the interrupted step started (a JVM half-way up)
            return status_of(interrupt)


def _main(argv: Sequence[str] | None, stopping: Callable[[], bool]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format=LOG_FORMAT,
        stream=sys.stderr,
    )
    format_root_handlers()
    # On the handlers: a logger's filter sees only its own records, and Py4J logs on the root
    # logger and on its own (py4j.clientserver). For the process's life: Py4J's finalizers log
    # too, as the interpreter ends.
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, Py4JStopsUnlogged) for f in handler.filters):
            handler.addFilter(Py4JStopsUnlogged(stopping))
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        # An error may quote what it refuses (a name from the history, a database's message).
        print(f"sparkwatch {args.command}: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`sparkwatch demo | head`): the command has cleaned up on the
        # way out; what it still had to say goes nowhere, quietly, and that is a normal end.
        silence_stdout()
        return 0
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        # A full disk or a dead device (`> /dev/full`, mostly): said in one line, with the file
        # when the error names one (the output has none).
        silence_stdout()
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"sparkwatch {args.command}: error: {exc.strerror}{where}", file=sys.stderr)
        return 1


_FULL = frozenset((errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO))


if __name__ == "__main__":
    sys.exit(main())
