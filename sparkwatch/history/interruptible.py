"""SQLite reads that stop at once for Ctrl-C or SIGTERM.

SQLite runs a statement in C, and Python runs a signal's handler only once it returns: a page far
down a history of millions of rows (``history state --offset``) went on for seconds after Ctrl-C.
While a connection is in use in the main thread, SQLite calls back every few milliseconds of work
(its progress handler), and that call is where Python runs a signal's handler mid-statement: a stop
signal that arrives there is noted, the statement is aborted (SQLITE_INTERRUPT), and the signal is
passed on to the handler it was meant for once the statement has stopped (the command's, which
raises its stop). A signal that arrives anywhere else goes straight on, as before.

Only noted, not raised in the progress handler: an exception there is swallowed by the sqlite3
module, and the stop with it.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import sqlalchemy as sa

from sparkwatch.interrupts import STOP_SIGNALS

Handler = Callable[[int, FrameType | None], Any]

CHECK_EVERY = 100_000
"""SQLite virtual machine steps between two calls of the progress handler: about a thousand
Python calls a second of a scan (no measurable cost), and at most 40 ms between two in the sort of
a page past 3 million rows."""


class _Noted:
    """The stop signals' handler while a statement may run: notes the first that comes in the
    progress handler, for :func:`stops_for_signals` to pass on once the statement has stopped."""

    def __init__(self, previous: dict[int, Handler]) -> None:
        self.previous = previous
        self.signum: int | None = None

    def progress(self) -> bool:
        """SQLite's progress handler: true aborts the statement."""
        return self.signum is not None

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            return  # the first is on its way; the command's stop is all there is to do
        if frame is not None and frame.f_code is _PROGRESS:
            self.signum = signum
            return
        self.pass_on(signum, frame)

    def pass_on(self, signum: int, frame: FrameType | None) -> None:
        self.previous[signum](signum, frame)


_PROGRESS = _Noted.progress.__code__


@contextmanager
def stops_for_signals(conn: sa.Connection) -> Iterator[None]:
    """While inside, a stop signal ends a statement of ``conn`` (SQLite, main thread) at once and
    is raised as its handler raises it; elsewhere (another database, thread), nothing changes:
    signal handlers are the main thread's, and psycopg's waits already hear them."""
    dbapi = conn.connection.dbapi_connection
    current = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    # Python handlers only: an ignored signal stays ignored, a default one ends the process.
    previous: dict[int, Handler] = {sig: h for sig, h in current.items() if callable(h)}
    if (not isinstance(dbapi, sqlite3.Connection) or not previous
            or threading.current_thread() is not threading.main_thread()
            or any(isinstance(getattr(h, "__self__", None), _Noted) for h in previous.values())):
        yield  # the last: a read inside a read, whose outer one passes the signal on
        return
    noted = _Noted(previous)
    for sig in previous:
        signal.signal(sig, noted.handler)
    dbapi.set_progress_handler(noted.progress, CHECK_EVERY)
    try:
        yield
    finally:
        # Handlers first: a signal from here on goes straight on (the noted one's raise, or a
        # new one's, ends the command; the rest of this clean-up does not matter then).
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        dbapi.set_progress_handler(None, CHECK_EVERY)
        if noted.signum is not None:
            # Raised over the statement's "interrupted", which is only how it stopped.
            noted.pass_on(noted.signum, None)
