"""A frame of `top` as lines no wider than the terminal: the query list, or one query's detail."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from sparkwatch.terminal import (
    clip,
    fmt_batch,
    fmt_bytes,
    fmt_count,
    fmt_rate,
    fmt_seconds,
    ljust,
    rjust,
)
from sparkwatch.top.model import Snapshot, TopOperator, TopQuery
from sparkwatch.top.view import KEYS_HELP, View, selected_index, visible

# (title, width) after the name column; query and operator rows share the grid.
COLUMNS = (
    ("STATUS", 11), ("BATCH", 7), ("TIME", 8), ("LAG", 8), ("ROWS", 9), ("GROWTH/S", 10),
    ("UPDATED", 9), ("REMOVED", 9), ("DROPPED", 9), ("MEMORY", 10),
)


def fmt_growth(g: float | None) -> str:
    if g is None or not math.isfinite(g):
        return "-"
    return f"{g:+.1f}" if abs(g) < 10_000 else ("+" if g > 0 else "-") + fmt_count(abs(g))


def frame(snap: Snapshot, view: View, width: int, height: int | None = None) -> list[str]:
    shown = visible(snap.queries, view)
    detail = next((q for q in snap.queries if q.key == view.detail), None)
    lines = [clip(_header(snap, view, len(shown)), width), clip(f"keys: {KEYS_HELP}", width)]
    if snap.error:
        lines.append(clip(f"! cannot read {snap.source}: {snap.error}", width))
    if snap.note:
        lines.append(clip(f"! {snap.note}", width))
    lines.append("")
    if detail is not None:
        body = _detail(detail, width)
    else:
        body, focus = _table(shown, view, width)
        if height is not None:
            body = _window(body, focus, height - len(lines) - (1 if view.editing else 0), width)
    lines += body
    if view.editing:
        lines.append(clip(f"filter: {view.filter}_", width))
    if height is not None and len(lines) > height:
        if height < 2:  # no room for the "more" line: a line past the screen's last scrolls it
            return lines[:1]
        lines = [*lines[: height - 1], clip(f"... {len(lines) - height + 1} more", width)]
    return lines


def _header(snap: Snapshot, view: View, shown: int) -> str:
    total = len(snap.queries)
    count = f"{total} quer{'y' if total == 1 else 'ies'}" + (
        f" ({shown} shown)" if shown != total else ""
    )
    # The source (a long URL) goes last: on a narrow terminal it is what gets cut.
    parts = ["sparkwatch top", count, f"sort: {view.sort}"]
    if view.filter and not view.editing:
        parts.append(f"filter: {view.filter}")
    parts += [time.strftime("%H:%M:%S", time.localtime(snap.taken_at)), snap.source]
    return " - ".join(parts)


NAME_MIN = 26
"""The name column's least width: on a narrow terminal the right-most columns go first."""


def _columns(width: int) -> tuple[tuple[str, int], ...]:
    fitting, used = [], NAME_MIN
    for title, w in COLUMNS:
        if used + w > width:
            break
        fitting.append((title, w))
        used += w
    return tuple(fitting)


def _row(name: str, cells: Sequence[str], width: int) -> str:
    columns = _columns(width)
    name_width = max(NAME_MIN, width - sum(w for _, w in columns))
    text = ljust(clip(name, name_width - 1), name_width)
    text += "".join(rjust(clip(c, w - 1), w) for c, (_, w) in zip(cells, columns, strict=False))
    return clip(text.rstrip(), width)


def _window(body: list[str], focus: int, room: int, width: int) -> list[str]:
    """The table cut to ``room`` lines, scrolled so that line ``focus`` (the marked query, with
    its first operator lines) stays on screen."""
    if len(body) <= room:
        return body
    header, rows = body[0], body[1:]
    fits = max(1, room - 2)  # the column titles and the "more" line
    start = min(max(0, focus - 1 + 3 - fits), len(rows) - fits)
    shown = rows[start : start + fits]
    more = f"... {len(rows) - len(shown)} more lines ({start} above)"
    return [header, *shown, clip(more, width)]


def _table(shown: Sequence[TopQuery], view: View, width: int) -> tuple[list[str], int]:
    """The table's lines and the line of the marked query."""
    lines = [_row("QUERY / OPERATOR", [t for t, _ in COLUMNS], width)]
    if not shown:
        lines.append("  (no queries" + (" match the filter)" if view.filter else " yet)"))
    marked, focus = selected_index(view, shown), 0
    for i, q in enumerate(shown):
        mark = ">" if i == marked else " "
        focus = len(lines) if i == marked else focus
        lines.append(_row(f"{mark} {q.title}", _query_cells(q), width))
        for op in q.operators:
            lines.append(_row(f"    #{op.index} {op.operator}", _operator_cells(op), width))
            identity = op.identity or (f"{op.kind} (plan not read)" if op.kind else "")
            if identity:
                lines.append(clip(f"        {identity}", width))
    return lines, focus


def _query_cells(q: TopQuery) -> list[str]:
    batch = fmt_batch(q.batch_id, digits=7)  # the BATCH column's width
    return [
        q.status, batch, fmt_seconds(q.batch_seconds), fmt_seconds(q.lag_seconds),
        fmt_count(q.rows), fmt_growth(q.growth),
    ]


def _operator_cells(op: TopOperator) -> list[str]:
    return [
        "", "", fmt_seconds(op.commit_seconds), "", fmt_count(op.rows),
        fmt_growth(op.growth), fmt_count(op.updated), fmt_count(op.removed),
        fmt_count(op.dropped), fmt_bytes(op.memory_bytes),
    ]


def _detail(q: TopQuery, width: int) -> list[str]:
    facts = [
        f"query {q.title}",
        f"  id {q.query_id}  run {q.run_id or '-'}  app {q.app_name or q.app_id or '-'}",
        f"  status {q.status}  batch {fmt_batch(q.batch_id)}  "
        f"batch time {fmt_seconds(q.batch_seconds)}  lag {fmt_seconds(q.lag_seconds)}",
        f"  input {fmt_rate(q.input_rate)}/s  processed {fmt_rate(q.processed_rate)}/s  "
        f"state rows {fmt_count(q.rows)}  growth {fmt_growth(q.growth)}/s",
        "",
    ]
    for op in q.operators:
        facts += [
            f"  #{op.index} {op.operator}: {op.identity or op.kind or '(plan not read)'}",
            f"      rows {fmt_count(op.rows)}  growth {fmt_growth(op.growth)}/s  "
            f"updated {fmt_count(op.updated)}  removed {fmt_count(op.removed)}  "
            f"dropped {fmt_count(op.dropped)}  memory {fmt_bytes(op.memory_bytes)}  "
            f"commit {fmt_seconds(op.commit_seconds)}",
        ]
    facts.append("  (esc: back to the list)")
    return [clip(line, width) for line in facts]
