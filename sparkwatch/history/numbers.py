"""The one test of a number read from the history (a column, a JSON map's value): whether it is
one a computation can use. SQLite keeps whatever it is given (text in an INTEGER column, 9e999 as
an infinity) and a JSON map may hold anything, so every reader that does arithmetic asks here."""

from __future__ import annotations

import math


def finite_number(value: object) -> int | float | None:
    """``value`` itself when it is an int or a float (not a bool) that is finite and within a
    float's range; None for anything else: text, bytes, a map, None, NaN, an infinity, an int
    past any float (``float()`` of it overflows, where a sum or a fit would go)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return value if math.isfinite(value) else None
    except OverflowError:  # an int too large for a float
        return None
