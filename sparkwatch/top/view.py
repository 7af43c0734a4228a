"""What the user chose: sort, filter, selection, drill-down; and what keys change it. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sparkwatch.top.model import TopQuery

# key -> (sort name, how to rank; larger first except by name)
SORTS: dict[str, tuple[str, Callable[[TopQuery], float]]] = {
    "g": ("growth", lambda q: q.growth if q.growth is not None else float("-inf")),
    "l": ("lag", lambda q: q.lag_seconds if q.lag_seconds is not None else float("-inf")),
    "b": ("batch", lambda q: q.batch_seconds if q.batch_seconds is not None else float("-inf")),
    "s": ("rows", lambda q: q.rows if q.rows is not None else float("-inf")),
}
SORT_NAMES = ("growth", "lag", "batch", "rows", "name")
KEYS_HELP = (
    "g growth  l lag  b batch time  s state rows  n name  / filter  up/down select  "
    "enter details  esc back  q quit"
)


@dataclass(slots=True)
class View:
    sort: str = "growth"
    filter: str = ""
    editing: bool = False
    """Typing a filter (keys go to the filter text until enter or esc)."""
    selected: int = 0
    """The marked row, kept for when the marked query leaves the list (filtered, gone)."""
    selected_key: tuple[str, str] | None = None
    """The marked query (app id, query id): the mark follows it through re-sorts and refreshes,
    so Enter opens the query the user marked, wherever it has moved."""
    detail: tuple[str, str] | None = None
    """The query drilled into (app id, query id)."""
    quit: bool = False


def visible(queries: Sequence[TopQuery], view: View) -> list[TopQuery]:
    needle = view.filter.strip().lower()
    shown = [q for q in queries if not needle or needle in q.text()]
    shown.sort(key=lambda q: (q.title.lower(), q.query_id))
    if view.sort != "name":
        rank = next(fn for name, fn in SORTS.values() if name == view.sort)
        shown.sort(key=rank, reverse=True)  # stable: ties stay by name
    return shown


def selected_index(view: View, shown: Sequence[TopQuery]) -> int:
    """The row of the marked query in ``shown``; the last marked row when it is not there."""
    for i, q in enumerate(shown):
        if q.key == view.selected_key:
            return i
    return min(view.selected, max(0, len(shown) - 1))


def handle_key(view: View, key: str, shown: Sequence[TopQuery]) -> None:
    if view.editing:
        _edit_filter(view, key)
        return
    row = selected_index(view, shown)
    if key == "q":
        view.quit = True
    elif key in SORTS:
        view.sort = SORTS[key][0]
    elif key == "n":
        view.sort = "name"
    elif key == "/":
        view.editing, view.filter = True, ""
    elif key in ("UP", "k"):
        row = max(0, row - 1)
    elif key in ("DOWN", "j"):
        row = min(max(0, len(shown) - 1), row + 1)
    elif key == "ENTER" and shown:
        view.detail = shown[row].key
    elif key in ("ESC", "BACKSPACE"):
        if view.detail is not None:
            view.detail = None
        else:
            view.filter = ""
    view.selected = row
    if key in ("UP", "k", "DOWN", "j") and shown or view.selected_key is None and shown:
        view.selected_key = shown[row].key


def _edit_filter(view: View, key: str) -> None:
    if key == "ENTER":
        view.editing = False
        view.selected, view.selected_key = 0, None
    elif key == "ESC":
        view.editing, view.filter = False, ""
    elif key == "BACKSPACE":
        view.filter = view.filter[:-1]
    elif len(key) == 1 and key.isprintable():
        view.filter += key
