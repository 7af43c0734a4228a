"""`sparkwatch run -- COMMAND...`: run an unmodified PySpark app with the listener attached.

Like ``opentelemetry-instrument``: the command runs with :mod:`sparkwatch.bootstrap` first on
``PYTHONPATH``; its ``sitecustomize`` attaches the listener to every SparkSession the driver
creates (classic and Spark Connect), configured by the same ``SPARKWATCH_*`` variables and
``spark.sparkwatch.*`` conf as ``sparkwatch.attach``. ``spark-submit`` hands its environment to
the driver's Python, so ``sparkwatch run -- spark-submit app.py`` works as ``python app.py`` does.

The command replaces this process (exec): signals reach it directly and its exit status is the
command's own, with nothing in between that could swallow either. Called from any thread (an
orchestrator that embeds ``main()``), it replaces the whole process all the same.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager

from sparkwatch.bootstrap import PATH as BOOTSTRAP_PATH
from sparkwatch.cli.errors import CliError

NOT_FOUND = 127
NOT_EXECUTABLE = 126


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "run",
        help="run a PySpark app with the listener attached, without changing its code",
        description="Run COMMAND (spark-submit app.py, python app.py, pyspark) with the sparkwatch "
        "listener attached to every SparkSession its driver creates. Configure it with the "
        "SPARKWATCH_* environment variables (e.g. SPARKWATCH_METRICS_PORT, "
        "SPARKWATCH_HISTORY_URL=off, SPARKWATCH_PUSH_URL) or spark.sparkwatch.* Spark conf. "
        "Signals and the exit status are the command's own.",
        epilog="example: sparkwatch run -- spark-submit --master local[2] app.py",
    )
    parser.add_argument(
        "--print-path",
        action="store_true",
        help="print the directory to put first on the driver's PYTHONPATH for the same effect "
        "(cluster deploy mode: spark.yarn.appMasterEnv.PYTHONPATH, "
        "spark.kubernetes.driverEnv.PYTHONPATH) and exit",
    )
    parser.add_argument("child", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                        help="the command to run, after --")
    parser.set_defaults(func=run_command)


def run_command(args: argparse.Namespace) -> int:
    if args.print_path:
        print(BOOTSTRAP_PATH)
        return 0
    command = list(args.child)  # not "command": that is the subcommand's name in main()
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise CliError("no command to run: sparkwatch run -- spark-submit app.py")
    if not command[0]:  # exec refuses an empty name with a ValueError
        raise CliError("the command to run is empty: sparkwatch run -- spark-submit app.py")
    env = child_environment(os.environ)
    try:
        with default_actions(PYTHON_IGNORED_SIGNALS):
            os.execvpe(command[0], command, env)
    except FileNotFoundError:
        print(f"sparkwatch run: command not found: {command[0]}", file=sys.stderr)
        return NOT_FOUND
    except PermissionError:
        print(f"sparkwatch run: cannot execute: {command[0]}", file=sys.stderr)
        return NOT_EXECUTABLE
    except OSError as exc:  # not a program (exec format), a path through a file, ...
        print(f"sparkwatch run: cannot execute {command[0]}: {exc.strerror or exc}",
              file=sys.stderr)
        return NOT_EXECUTABLE
    except ValueError:
        if not any("\0" in part for part in (*command, *env, *env.values())):
            raise  # not the arguments' fault
        # A NUL character in an argument (from a caller of main(), not a shell).
        raise CliError("cannot execute the command: an argument holds a NUL character") from None
    return 0  # not reached: exec replaced this process


PYTHON_IGNORED_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name))
"""Signals Python ignores from its start (a write to a closed pipe is an EPIPE error, not the end
of the process). An ignored signal stays ignored across exec: ``sparkwatch run -- yes | head``
then ended with "Broken pipe" and status 1, where ``yes | head`` ends quietly by SIGPIPE (141).
subprocess puts them back for the programs it starts (``restore_signals``); so does this
(:func:`default_actions`)."""


def default_actions(signals: Sequence[int]) -> AbstractContextManager[None]:
    """``signals`` at their default action inside (the exec), so that the command starts as any
    program a shell starts (see :data:`PYTHON_IGNORED_SIGNALS`); on the way out, reached only when
    exec failed, each has its action back and this Python goes on as it was."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    return (_set_by_python if on_main_thread else _set_by_c_library)(signals)


@contextmanager
def _set_by_python(signals: Sequence[int]) -> Iterator[None]:
    previous = {sig: signal.signal(sig, signal.SIG_DFL) for sig in signals}
    try:
        yield
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action)


@contextmanager
def _set_by_c_library(signals: Sequence[int]) -> Iterator[None]:
    """Off the main thread, where Python refuses signal.signal (main() called on an orchestrator's
    thread was a ValueError traceback): a signal's action is the process's, and the C library's
    signal() sets it from any thread. Only the ignored ones need it (exec puts a caught signal
    back to its default itself); Python's table keeps SIG_IGN, right again once exec failed."""
    c_signal = _c_library_signal()
    ignored = [sig for sig in signals if signal.getsignal(sig) is signal.SIG_IGN]
    if c_signal is None:
        yield
        return
    for sig in ignored:
        c_signal(sig, signal.SIG_DFL)
    try:
        yield
    finally:
        for sig in ignored:
            c_signal(sig, signal.SIG_IGN)


def _c_library_signal() -> Callable[[int, int], object] | None:
    """The C library's ``signal()``; None where there is none to load: the command then starts
    with them ignored, which a debug line says."""
    import ctypes  # here: every command imports this module to register it

    try:
        function = ctypes.CDLL(None).signal
    except (OSError, AttributeError) as exc:
        logging.getLogger(__name__).debug("SIGPIPE and SIGXFSZ stay ignored: %s", exc)
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = (ctypes.c_int, ctypes.c_void_p)
    return function


def child_environment(env: Mapping[str, str], python: str | None = None) -> dict[str, str]:
    """``env`` with the bootstrap first on ``PYTHONPATH``; the driver's Python defaults to this
    one (which has sparkwatch installed) when neither PySpark variable names one."""
    out = dict(env)
    out["PYTHONPATH"] = prepend_path(BOOTSTRAP_PATH, env.get("PYTHONPATH", ""))
    if not env.get("PYSPARK_DRIVER_PYTHON") and not env.get("PYSPARK_PYTHON"):
        # Only the driver's: executors may be other machines, where this path means nothing.
        out["PYSPARK_DRIVER_PYTHON"] = python or sys.executable
    return out


def prepend_path(first: str, path: str) -> str:
    """``first``, then ``path``'s entries but ``first``. An empty entry stays: on
    ``PYTHONPATH`` it is the current directory (``PYTHONPATH=/lib:``), and an app run from its
    project's root that imports from there failed with ModuleNotFoundError once it was dropped."""
    parts: Sequence[str] = [p for p in path.split(os.pathsep) if p != first] if path else []
    return os.pathsep.join([first, *parts])
