"""A compact live table of queries and their state operators, drawn from a :class:`MetricState`.

:func:`render` is pure (state in, text out) so it is tested without Spark;
:mod:`sparkwatch.terminal` draws it: in place on a terminal, as snapshots when stdout is a pipe.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sparkwatch.metrics.state import QueryState
from sparkwatch.model.events import AppInfo, StateOperator
from sparkwatch.plan.describe import summary
from sparkwatch.plan.model import Source
from sparkwatch.terminal import (
    BOLD,
    DIM,
    RESET,
    clip,
    display_width,
    fmt_bytes,
    fmt_count,
    fmt_rate,
    fmt_seconds,
    ljust,
    printable,
    rjust,
)

STATUS_COLORS = {"active": "\x1b[32m", "idle": "\x1b[33m", "failed": "\x1b[31m", "terminated": DIM}
MIN_NAME = 14


@dataclass(frozen=True, slots=True)
class Column:
    query_title: str
    operator_title: str
    width: int
    query_left: bool = False
    """Left-align this column in query rows (text); numbers are always right-aligned."""


# Query rows and operator rows share one grid so the table stays narrow; each kind of row has its
# own header line naming what the shared columns hold for it.
COLUMNS: tuple[Column, ...] = (
    Column("STATUS", "ROWS", 11, query_left=True),
    Column("BATCH", "UPDATED", 9),
    Column("IN/S", "REMOVED", 9),
    Column("PROC/S", "DROPPED", 9),
    Column("DURATION", "MEMORY", 10),
    Column("WM LAG", "COMMIT", 9),
)


# --- rows -----------------------------------------------------------------------------------------


def status(q: QueryState) -> str:
    if q.failed:
        return "failed"
    if not q.active:
        return "terminated"
    return "idle" if q.idle else "active"


def watermark_lag(q: QueryState) -> float | None:
    p = q.last_progress
    if p is None or p.event_time.watermark is None or p.event_time.watermark <= 0:
        return None  # batch 0 reports the epoch: no watermark yet
    return max(0.0, p.timestamp - p.event_time.watermark)


def query_cells(q: QueryState) -> list[str]:
    p = q.last_progress
    if p is None:
        return [status(q), "-", "-", "-", "-", "-"]
    return [
        status(q),
        str(p.batch_id),
        fmt_rate(p.input_rows_per_second),
        fmt_rate(p.processed_rows_per_second),
        fmt_seconds(p.batch_duration_ms / 1000),
        fmt_seconds(watermark_lag(q)),
    ]


def operator_cells(q: QueryState, op: StateOperator) -> list[str]:
    totals = q.operators.get((op.index, op.name))
    return [
        fmt_count(op.num_rows_total),
        fmt_count(op.num_rows_updated),
        fmt_count(op.num_rows_removed),
        fmt_count(totals.amounts["num_rows_dropped_by_watermark"] if totals is not None
                  else op.num_rows_dropped_by_watermark),
        fmt_bytes(op.memory_used_bytes),
        fmt_seconds(op.commit_time_ms / 1000),
    ]


def sort_key(q: QueryState) -> tuple[str, str, str, str]:
    return (q.app.name, q.app.id, q.name or q.query_id, q.query_id)


# --- layout ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Layout:
    name_width: int
    columns: tuple[Column, ...]

    @property
    def width(self) -> int:
        return self.name_width + sum(c.width for c in self.columns)


def layout(names: Iterable[str], width: int) -> Layout:
    """Give the name column what it needs up to what the width leaves, then drop columns from the
    right until the line fits: a line wider than the terminal wraps and breaks in-place redraw."""
    longest = max((display_width(printable(n)) for n in names), default=MIN_NAME) + 2
    columns = COLUMNS
    while True:
        room = width - sum(c.width for c in columns)
        name_width = max(min(MIN_NAME, width), min(longest, room))
        if name_width + sum(c.width for c in columns) <= width or not columns:
            return Layout(name_width, columns)
        columns = columns[:-1]


def line(
    lay: Layout, name: str, cells: Sequence[str], colors: Sequence[str] = (), query: bool = True
) -> str:
    parts = [ljust(clip(name, lay.name_width - 1), lay.name_width)]
    for i, (col, cell) in enumerate(zip(lay.columns, cells, strict=False)):
        text = clip(cell, col.width - 1)
        if query and col.query_left:
            text = " " + ljust(text, col.width - 1)
        else:
            text = rjust(text, col.width)
        color = colors[i] if i < len(colors) else ""
        parts.append(f"{color}{text}{RESET}" if color else text)
    return "".join(parts).rstrip()


def _status_color(cell: str, color: bool) -> list[str]:
    return [STATUS_COLORS.get(cell, "")] if color else []


def _styled(text: str, style: str, color: bool) -> str:
    return f"{style}{text}{RESET}" if color and text else text


# --- render ---------------------------------------------------------------------------------------


def render(
    apps: Sequence[AppInfo],
    queries: Sequence[QueryState],
    width: int,
    *,
    height: int | None = None,
    color: bool = False,
) -> str:
    """The table as text, no line wider than ``width`` (and no more than ``height`` lines)."""
    ordered = sorted(queries, key=sort_key)
    names = [q.name or q.query_id for q in ordered] + [
        f"  #{op.index} {op.name}"
        for q in ordered
        if q.last_progress is not None
        for op in q.last_progress.state_operators
    ]
    lay = layout(names, width)
    out = [_styled(clip(app_line(apps, ordered), width), BOLD, color)]
    out.append(_styled(line(lay, "QUERY", [c.query_title for c in lay.columns]), BOLD, color))
    titles = [c.operator_title for c in lay.columns]
    out.append(_styled(line(lay, "  OPERATOR", titles, query=False), DIM, color))
    if not ordered:
        out.append(_styled(clip("  (no streaming queries yet)", width), DIM, color))
    for q in ordered:
        out.extend(query_lines(q, lay, width, color))
    return "\n".join(fit_height(out, height, width))


def app_line(apps: Sequence[AppInfo], queries: Sequence[QueryState]) -> str:
    counts: dict[str, int] = {}
    for q in queries:
        counts[status(q)] = counts.get(status(q), 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    app_text = "; ".join(
        f"{a.name} ({a.id}{', Spark ' + a.spark_version if a.spark_version else ''})"
        for a in sorted(apps, key=lambda a: (a.name, a.id))
    )
    return f"{app_text or 'no app'} - {len(queries)} queries" + (f": {summary}" if summary else "")


def query_lines(q: QueryState, lay: Layout, width: int, color: bool) -> list[str]:
    cells = query_cells(q)
    lines = [line(lay, q.name or q.query_id, cells, _status_color(cells[0], color))]
    p = q.last_progress
    if p is None and q.active:
        lines.append(_styled(clip("  (waiting for the first batch)", width), DIM, color))
    for op in sorted(p.state_operators if p is not None else (), key=lambda o: o.index):
        lines.append(line(lay, f"  #{op.index} {op.name}", operator_cells(q, op), query=False))
        if q.plan_source() is Source.PLAN:  # what the operator is, once its plan was read
            lines.append(_styled(clip(f"      {summary(q.identity(op))}", width), DIM, color))
    if q.failed and q.exception:
        error = q.exception.strip().splitlines()[0] if q.exception.strip() else q.exception
        lines.append(_styled(clip(f"  ! {error}", width), STATUS_COLORS["failed"], color))
    return lines


def fit_height(lines: list[str], height: int | None, width: int) -> list[str]:
    # A frame taller than the terminal scrolls it, and the next redraw from "home" would then
    # leave the scrolled-off part behind.
    if height is None or len(lines) <= height:
        return lines
    keep = max(1, height - 1)
    more = f"... {len(lines) - keep} more lines (enlarge the terminal)"
    return [*lines[:keep], clip(more, width)]
