"""The interrupt behind an exception: shared by the commands' exit and the rooms that go on
past a failure (doctor's checkpoint reads), which must still stop for a signal; and which stop
signals a command may handle at all."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def interrupt_within(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt behind ``exc``, if one is: Python wraps what some of its own hooks raise
    (3.11 turns an exception from a descriptor's ``__set_name__``, such as a dataclass field
    being made while the command's modules import, into a RuntimeError), so a signal at that
    moment arrives as another exception with the interrupt as its cause."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


IGNORABLE = (signal.SIGINT,)
"""What a command leaves ignored when it starts with it ignored. SIGINT only, as Python does: a
shell ignores it in a script's background jobs (``cmd &``). SIGTERM is how a command stops what it
started (a collector, a JVM); an ignored one passed on would leave them running."""

_ignored_at_start: frozenset[int] = frozenset()


@contextmanager
def ignored_at_start() -> Iterator[None]:
    """While inside (a command's run), :func:`not_ignored` leaves out the :data:`IGNORABLE`
    signals ignored as it began: noted before anything (PySpark's SparkContext installs its own
    SIGINT handler) puts a handler over them. Forgotten on leaving: ``main()`` also runs inside
    test processes."""
    global _ignored_at_start
    before = _ignored_at_start
    _ignored_at_start = frozenset(
        sig for sig in IGNORABLE if signal.getsignal(sig) is signal.SIG_IGN)
    try:
        yield
    finally:
        _ignored_at_start = before


def not_ignored(signals: tuple[int, ...] = STOP_SIGNALS) -> tuple[int, ...]:
    """The ones of ``signals`` the command handles: all but those it was started ignoring
    (:func:`ignored_at_start`). A shell starts a script's background job with SIGINT
    ignored so that Ctrl-C at the terminal, which reaches the whole process group, stops the
    script and leaves the job running; a command that handled it anyway would stop too."""
    return tuple(sig for sig in signals if sig not in _ignored_at_start)
