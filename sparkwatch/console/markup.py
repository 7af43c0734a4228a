"""Text as the console's pages show it: the one place a value becomes HTML or SVG text.

Names, ids, operators, errors and labels come from Spark events and the history. Escaping
``&<>"'`` keeps them out of the markup; showing every other character a terminal would act on as
its escape (:func:`sparkwatch.terminal.printable`, the one rule, shared with ``top``, the demo and
the logs) keeps them inert too: a raw control character is a parse error in HTML and is copied
into a terminal with the text, a bidi override makes ``job\\u202egnp.exe`` display as
``jobexe.png``, and a lone surrogate cannot be encoded as UTF-8 (the page would be a 500).
Tab and newline are shown as ``\\x09`` and ``\\x0a`` as well: HTML would show either as a space,
so two names that differ only there would look alike. Links are built from the raw values
(percent-encoded), never from what this shows."""

from __future__ import annotations

from html import escape

from sparkwatch.terminal import printable


def e(value: object) -> str:
    """Text as HTML, inert (quotes escaped too: safe inside attributes)."""
    return escape(printable("" if value is None else str(value)), quote=True)


def u(value: object) -> str:
    """User text (a name, an id, an operator, a message) as HTML, isolated from the text around
    it: right-to-left letters in a name cannot reorder what follows it."""
    return f"<bdi>{e(value)}</bdi>"
