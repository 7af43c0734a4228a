"""Markdown tables (printed as they are and recorded in docs/benchmarks.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def ms(summary: dict[str, Any] | None, key: str) -> float | None:
    return None if summary is None else float(summary[key])


def ratio(num: float | None, den: float | None) -> str:
    if num is None or not den:
        return "–"
    return f"{num / den:.1f}×"


def percent(num: float, den: float) -> str:
    return "–" if den == 0 else f"{100.0 * num / den:.1f} %"
