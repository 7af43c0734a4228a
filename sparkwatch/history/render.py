"""Plain-text rendering for the CLI: aligned, compact tables and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sparkwatch.jsoncodec import dumps_strict
from sparkwatch.terminal import clip, display_width, ljust, rjust

MISSING = "-"
CELL_WIDTH = 200
"""The widest text cell (a checkpoint path fits): a 100 KB name would pad every row of its
column. JSON output keeps every value whole."""


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned, text left-aligned."""
    cells = [[cell_text(v) for v in row] for row in rows]
    widths = [max([display_width(h), *(display_width(r[i]) for r in cells)])
              for i, h in enumerate(headers)]
    numeric = [bool(rows) and all(_is_number(r[i]) for r in rows) for i in range(len(headers))]
    lines = [_line(headers, widths, numeric)]
    lines.extend(_line(r, widths, numeric) for r in cells)
    return "\n".join(lines)


def _line(cells: Sequence[str], widths: Sequence[int], numeric: Sequence[bool]) -> str:
    parts = [
        rjust(cell, width) if right else ljust(cell, width)
        for cell, width, right in zip(cells, widths, numeric, strict=True)
    ]
    return "  ".join(parts).rstrip()


def _is_number(value: Any) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool))


def cell_text(value: Any) -> str:
    if value is None:
        return MISSING
    if isinstance(value, datetime):
        return format_time(value)
    if isinstance(value, float):
        return f"{value:.1f}"
    return clip(str(value), CELL_WIDTH)


def format_time(value: datetime) -> str:
    """UTC to the second: the table is for reading, JSON output has full precision."""
    return value.strftime("%Y-%m-%d %H:%M:%SZ")


def first_line(text: str | None, width: int = 60) -> str | None:
    """A one-line preview of a long text (exceptions carry whole stack traces); None for a text
    of whitespace only (an exception of "\\n" has no first line: it was an IndexError)."""
    lines = text.strip().splitlines() if text else []
    if not lines:
        return None
    line = lines[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def to_json(items: Sequence[dict[str, Any]]) -> str:
    """Strict JSON (:func:`~sparkwatch.jsoncodec.dumps_strict`): a non-finite number (a NaN in a
    SQLite history's JSON map) is null, as the collector's read API answers the same history;
    bare NaN is no JSON, and ``jq`` refused the whole answer."""
    return dumps_strict(list(items))
