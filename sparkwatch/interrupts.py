"""The interrupt behind an exception: shared by the commands' exit and the rooms that go on
past a failure (doctor's checkpoint reads), which must still stop for a signal; and which stop
signals a command may handle at all."""

from __future__ import annotations

import signal

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


def not_ignored(signals: tuple[int, ...] = STOP_SIGNALS) -> tuple[int, ...]:
    """The ones of ``signals`` this process was not started ignoring. A shell starts a script's
    background job (``cmd &``) with SIGINT ignored, so that Ctrl-C at the terminal, which reaches
    the whole process group, stops the script and leaves the job running; a command that handled
    it anyway would stop too. Python itself leaves an ignored SIGINT alone: so does every command,
    and ``sparkwatch run`` passes it on ignored to what it runs."""
    return tuple(sig for sig in signals if signal.getsignal(sig) is not signal.SIG_IGN)
