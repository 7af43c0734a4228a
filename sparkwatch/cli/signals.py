"""How every command ends on Ctrl-C (SIGINT) and SIGTERM, at any moment, start-up included.

The convention: the command stops cleanly (a long-running one finishes its clean stop: queries
stopped, history written, children ended) and exits with 128 + the signal's number, 130 after
SIGINT and 143 after SIGTERM, which is what a shell shows for a process that signal ended. No
traceback. A signal that arrives while the command is already stopping is noted and waits for the
stop, which is bounded; SIGKILL ends a process at once.

Without this, SIGTERM (its default action) killed a command where it stood, skipping every clean-up
(the terminal left in cbreak mode by ``top``, queries left ``running`` in the history), and a
second Ctrl-C interrupted the clean stop itself.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import CodeType, FrameType

from sparkwatch.interrupts import STOP_SIGNALS, ignored_at_start, not_ignored
from sparkwatch.interrupts import interrupt_within as interrupt_within

SIGNALS = STOP_SIGNALS
STILL_STOPPING = b"sparkwatch: already stopping, please wait (SIGKILL ends it at once)\n"


class Stopped(KeyboardInterrupt):
    """A stop asked for by a signal. A KeyboardInterrupt, so that code written for Ctrl-C (and
    PySpark's own handler) treats SIGTERM the same way."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def exit_status(signum: int) -> int:
    return 128 + signum


def status_of(exc: KeyboardInterrupt) -> int:
    """The exit status for an interrupt: a plain KeyboardInterrupt (PySpark's handler, Python's
    default) came from SIGINT."""
    return exit_status(exc.signum if isinstance(exc, Stopped) else signal.SIGINT)


class Py4JStopsUnlogged(logging.Filter):
    """Py4J logs every interrupt that lands in one of its calls to the JVM (``logging.exception``
    on the root logger, with the stack) before passing it on, and then every call the stop finds
    broken (a connection the interrupt left mid-answer, a JVM already ending). Here an interrupt
    is the stop a signal asked for, which the exit status reports: Py4J's records from then on
    are noise. Before it, they all stay."""

    def __init__(self, stopping: Callable[[], bool]) -> None:
        super().__init__()
        self._stopping = stopping

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}py4j{os.sep}" not in record.pathname:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        return not (isinstance(exc, KeyboardInterrupt) or self._stopping())


def note_still_stopping() -> None:
    """One line on stderr; os.write, not print: a handler can run in the middle of a print."""
    with suppress(OSError):
        os.write(2, STILL_STOPPING)


class SignalStop:
    """The first SIGINT or SIGTERM: raises :class:`Stopped` where the command is (its ``finally``
    blocks clean up); a later one, while that stop runs, is only noted."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            note_still_stopping()
            return
        self.signum = signum
        raise Stopped(signum)

    def unraisable_hook(self, previous: Callable[[sys.UnraisableHookArgs], object]
                        ) -> Callable[[sys.UnraisableHookArgs], None]:
        """A ``sys.unraisablehook`` that gives the signal back when Python swallowed its
        :class:`Stopped`: raised while a ``__del__`` or another finalizer ran, it is only
        reported, and the command went on as if nothing came (a Ctrl-C lost, and each later one
        only noted). The signal is sent again once the main thread has left this hook (raised
        in the hook, it would be swallowed too); anything else goes to ``previous``."""

        def hook(unraisable: sys.UnraisableHookArgs) -> None:
            exc = unraisable.exc_value
            if not isinstance(exc, Stopped) or exc.signum != self.signum:
                previous(unraisable)
                return
            self.signum = None  # not stopping yet: the signal, sent again, is a first one
            threading.Thread(target=_send_again,
                             args=(exc.signum, threading.get_ident(), hook.__code__),
                             name="sparkwatch-signal-again", daemon=True).start()

        return hook

    def status(self, returned: int) -> int:
        """The exit status of a command that returned ``returned``: a server that takes the
        signal as its own clean stop (uvicorn swallows the interrupt) still exits 128 + N."""
        return exit_status(self.signum) if self.signum is not None and returned == 0 else returned


def _send_again(signum: int, main_thread: int, hook: CodeType,
                within_seconds: float = 1.0) -> None:
    """Send ``signum`` to this process once the main thread is out of ``hook`` (looked for in
    its stack; after ``within_seconds`` at the latest)."""
    deadline = time.monotonic() + within_seconds
    while time.monotonic() < deadline and _running(main_thread, hook):
        time.sleep(0.001)
    os.kill(os.getpid(), signum)


def _running(thread: int, code: CodeType) -> bool:
    frame = sys._current_frames().get(thread)
    while frame is not None and frame.f_code is not code:
        frame = frame.f_back
    return frame is not None


@contextmanager
def stop_with_exit_status() -> Iterator[SignalStop]:
    """SIGINT and SIGTERM handled by a :class:`SignalStop` while inside. Handlers are restored on
    a normal way out (``main()`` also runs inside test processes)."""
    stop = SignalStop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    with ignored_at_start():
        yield from _handled_by(stop)


def _handled_by(stop: SignalStop) -> Iterator[SignalStop]:
    previous = {sig: signal.signal(sig, stop.handler) for sig in not_ignored()}
    previous_hook, sys.unraisablehook = sys.unraisablehook, stop.unraisable_hook(
        sys.unraisablehook)
    try:
        yield stop
    finally:
        # Once stopping, the process is on its way out: a signal during the interpreter's own
        # end (joining threads, atexit) is noted too, not a KeyboardInterrupt with a traceback.
        if stop.signum is None:
            for sig, old in previous.items():
                signal.signal(sig, old)
            sys.unraisablehook = previous_hook
        else:
            # Python puts back the default action of every signal it handled once its atexit
            # hooks have run, and a signal in that last moment killed the command (status -15).
            # Ignored signals stay ignored; hooks run last-registered first, so this is the
            # first, after the threads are joined (a signal meanwhile is still noted).
            atexit.register(_ignore_signals)


def _ignore_signals() -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def children() -> frozenset[int]:
    """The processes this one has started that are still there (Linux; elsewhere none)."""
    return frozenset(_children_of().get(os.getpid(), []))


def end_descendants(spared: frozenset[int] = frozenset()) -> None:
    """SIGTERM every process this one started that is still there, and theirs: a start of Spark
    cut short leaves its JVM launching (spark-submit, its launcher, the JVM), which would end by
    itself only once it has started and read the end of its stdin, tens of seconds later on a
    busy machine. Children in ``spared`` (there before the command began: a notebook's or a test
    process's own Spark JVM) and theirs are left alone. Linux (/proc) only; elsewhere that later
    end it is."""
    tree = _children_of()
    pending = [pid for pid in tree.get(os.getpid(), []) if pid not in spared]
    while pending:
        pid = pending.pop()
        pending.extend(tree.get(pid, []))
        with suppress(OSError):
            os.kill(pid, signal.SIGTERM)


def _children_of() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree
