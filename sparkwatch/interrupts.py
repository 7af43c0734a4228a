"""The interrupt behind an exception: shared by the commands' exit and the rooms that go on
past a failure (doctor's checkpoint reads), which must still stop for a signal."""

from __future__ import annotations


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
