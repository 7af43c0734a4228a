"""Whole-number options held to a range at the argument edge.

A number past what the database binds (SQLite and PostgreSQL take signed 64-bit integers) used to
reach the driver and come back as an OverflowError traceback; refused here it is argparse's usage
error instead, naming the option, exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

# 64-bit bound parameters hold up to 2**63 - 1 (about 9.2e18). Rows to skip or show are capped
# well below, so that a reader adding a limit to an offset (history state does) stays inside.
MAX_ROWS = 10**18
# Integer columns (operator indexes) are 32-bit in the PostgreSQL schema.
MAX_INT32 = 2**31 - 1
# Longs in Spark (batch ids): what the JVM parses; past it, a NumberFormatException.
MAX_INT64 = 2**63 - 1


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: a whole number from ``low`` to ``high`` (both included)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {shown(text)}") from None
        if value < low:
            raise argparse.ArgumentTypeError(
                "must not be negative" if low == 0 else f"must be at least {low}"
            )
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {high}")
        return value

    return parse


def shown(text: str) -> str:
    """``text`` quoted for a one-line error, cut short: int() refuses strings of over 4300
    digits, and echoing one whole would flood the line."""
    return repr(text) if len(text) <= 40 else repr(text[:37] + "...")
