"""The live loop: poll the source, redraw in place, read single keys without echo."""

from __future__ import annotations

import contextlib
import os
import select
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from sparkwatch.terminal import Screen
from sparkwatch.top.model import Snapshot
from sparkwatch.top.rates import GrowthTracker
from sparkwatch.top.render import frame
from sparkwatch.top.view import View, handle_key, visible

_ESCAPES = {"[A": "UP", "[B": "DOWN", "OA": "UP", "OB": "DOWN"}


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Keys one at a time, not echoed; Ctrl-C still interrupts."""
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def read_key(fd: int, timeout: float) -> str | None:
    """One key (``UP``, ``DOWN``, ``ENTER``, ``ESC``, ``BACKSPACE`` or the character)."""
    ready, _, _ = select.select([fd], [], [], max(0.0, timeout))
    if not ready:
        return None
    char = os.read(fd, 1).decode(errors="replace")
    if char == "\x1b":
        more = ""
        while len(more) < 2 and select.select([fd], [], [], 0.05)[0]:
            more += os.read(fd, 1).decode(errors="replace")
        return _ESCAPES.get(more, "ESC")
    if char in ("\r", "\n"):
        return "ENTER"
    if char in ("\x7f", "\x08"):
        return "BACKSPACE"
    return char or None


def run_live(
    read: Callable[[], Snapshot],
    view: View,
    interval: float,
    out: TextIO | None = None,
    fd: int | None = None,
) -> None:
    out = out if out is not None else sys.stdout
    fd = sys.stdin.fileno() if fd is None else fd
    tracker, screen = GrowthTracker(), Screen(out, tty=True)
    snap, next_poll = Snapshot(source="", taken_at=time.time()), 0.0
    with cbreak(fd):
        try:
            while not view.quit:
                if time.monotonic() >= next_poll:
                    snap = tracker.update(read())
                    next_poll = time.monotonic() + interval
                width, height = screen.size()
                screen.show(frame(snap, view, width, height))
                key = read_key(fd, next_poll - time.monotonic())
                if key is not None:
                    handle_key(view, key, visible(snap.queries, view))
        finally:
            screen.close()


def print_once(snap: Snapshot, view: View, out: TextIO | None, width: int) -> None:
    """One frame of ``snap`` as plain text (a pipe, --once). ``out`` None (a closed stdout:
    ``>&-``) writes nothing, as print() does for every other command."""
    print("\n".join(frame(snap, view, width)), file=out)
