"""Text outputs line up by the columns a terminal gives each character, not by characters: a
Japanese or Chinese query name (two columns a character) padded by ``len`` pushed its row's
numbers out of their column, and in `top` and the demo past the screen's edge, where the line
wrapped and the in-place redraw broke."""

from __future__ import annotations

import pytest

from sparkwatch.history.render import table
from sparkwatch.model.events import EventKind
from sparkwatch.terminal import clip, display_width, ljust, rjust
from sparkwatch.top.model import Snapshot, TopQuery
from sparkwatch.top.render import frame
from sparkwatch.top.view import View
from tests.test_demo import ROCKSDB_SAMPLES, feed, rendered, sample_state

WIDE = "注文の集計" * 6
"""30 characters, 60 columns: wider than any name column."""
NAMES = ("orders", "注文の集計", WIDE, "café", "cafe\u0301 au lait", "📈 growth")


def end_of(line: str, token: str) -> int:
    """The terminal column where ``token`` (its first occurrence) ends on ``line``."""
    return display_width(line[: line.index(token) + len(token)])


def test_a_wide_character_takes_two_columns_and_a_combining_mark_none() -> None:
    assert display_width("orders") == 6
    assert display_width("注文の集計") == 10
    assert display_width("ｆｕｌｌ") == 8  # fullwidth Latin
    assert display_width("cafe\u0301") == 4  # e and a combining acute: one column
    assert display_width("📈") == 2
    assert ljust("注文", 6) == "注文  " and rjust("注文", 6) == "  注文"


@pytest.mark.parametrize("width", range(0, 16))
def test_clip_cuts_wide_text_to_the_columns_it_is_given(width: int) -> None:
    cut = clip("注文の集計注文", width)
    assert display_width(cut) <= width
    if width >= 14:
        assert cut == "注文の集計注文"
    elif width > 0:
        assert cut.endswith("…") and display_width(cut) >= width - 1


def test_the_history_table_aligns_wide_names_by_columns() -> None:
    text = table(["name", "rows"], [[n, 12345] for n in NAMES])
    lines = text.splitlines()
    assert {display_width(line) for line in lines} == {display_width(lines[0])}
    assert {end_of(line, "12345") for line in lines[1:]} == {display_width(lines[0])}


@pytest.mark.parametrize("width", [40, 80, 132])
def test_top_keeps_its_grid_and_the_screen_s_width_with_wide_names(width: int) -> None:
    snap = Snapshot(source="test", taken_at=0)
    snap.queries = [TopQuery(app_id="a", query_id=str(i), name=n) for i, n in enumerate(NAMES)]
    lines = frame(snap, View(), width, 24)
    rows = [line for line in lines if "active" in line]
    assert len(rows) == len(NAMES)
    assert all(display_width(line) <= width for line in lines), lines
    assert len({end_of(row, "active") for row in rows}) == 1, rows


@pytest.mark.parametrize("width", [50, 80, 160])
def test_the_demo_table_keeps_its_grid_and_the_screen_s_width_with_wide_names(width: int) -> None:
    state, _ = sample_state(*ROCKSDB_SAMPLES)
    for i, name in enumerate(NAMES):
        feed(state, EventKind.STARTED, {"id": f"q-{i}", "runId": f"r-{i}", "name": name,
                                        "timestamp": "2026-11-21T10:00:00.000Z"})
    lines = rendered(state, width).splitlines()
    rows = [line for line in lines[1:] if " active" in line]  # the first: the app's counts
    assert len(rows) == len(ROCKSDB_SAMPLES) + len(NAMES)
    assert all(display_width(line) <= width for line in lines), lines
    assert len({end_of(row, "active") for row in rows}) == 1, rows
