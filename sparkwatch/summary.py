"""One line for an exception, for logs, CLI output and error answers.

Database drivers and Spark put the useful sentence first and pages of context (SQL, parameters,
JVM stacks) after it; SQLAlchemy wraps the driver's own error, whose message is the one to show.
"""

from __future__ import annotations

from typing import Any


def one_line(exc: BaseException) -> str:
    """The first non-blank line of the exception's message (the wrapped driver error's, for a
    SQLAlchemy error), or the exception's type name when it has no message."""
    inner = getattr(exc, "orig", None)
    shown = inner if isinstance(inner, BaseException) else exc
    for line in str(shown).splitlines():
        if line.strip():
            return line.strip()
    return type(shown).__name__


def quoted(value: Any, chars: int = 80) -> str:
    """``value`` as a one-line message quotes it: its repr (escapes, never a character a
    terminal acts on), cut to ``chars`` with "..." (a refused value may be megabytes)."""
    return cut(repr(value), chars)


def cut(text: str, chars: int) -> str:
    """``text``, or its first ``chars`` characters ending in "..." when it is longer."""
    return text if len(text) <= chars else text[: chars - 3] + "..."
