"""Text outputs line up by the columns a terminal gives each character, not by characters: a
Japanese or Chinese query name (two columns a character) padded by ``len`` pushed its row's
numbers out of their column, and in `top` and the demo past the screen's edge, where the line
wrapped and the in-place redraw broke."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import pytest

from sparkwatch.history.render import table
from sparkwatch.model.events import EventKind
from sparkwatch.terminal import (
    Screen,
    clip,
    display_width,
    fmt_batch,
    fmt_count,
    fmt_seconds,
    ljust,
    rjust,
)
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


@pytest.mark.parametrize(("value", "shown"), [
    (999_499_999, "999M"),
    (999_600_000, "1G"),  # rounded past 999.5M: it was "1e+03M"
    (12_345_678_901, "12.3G"),
    (999_999_999_999, "1.0e12"),  # it was "1e+03G"
    (-(2**63), "-9.2e18"),
])
def test_a_count_near_a_unit_s_end_takes_the_next_unit(value: float, shown: str) -> None:
    assert fmt_count(value) == shown


def test_a_duration_past_days_is_an_exponent_without_a_leading_zero() -> None:
    assert (fmt_seconds(31_536_000), fmt_seconds(8.64e9), fmt_seconds(1e308)) == (
        "365d", "9e9s", "1e308s")


@pytest.mark.parametrize(("batch_id", "digits", "shown"), [
    (1_234_567, 7, "1234567"),
    (12_345_678, 7, "12.3M"),  # it was cut to its column as "123456…", another number
    (12_345_678, 15, "12345678"),
    (1e308, 15, "1.0e308"),
    (None, 7, "-"),
    (float("nan"), 7, "-"),
])
def test_a_batch_id_is_exact_while_it_fits_its_column(
        batch_id: float | None, digits: int, shown: str) -> None:
    assert fmt_batch(batch_id, digits) == shown


@contextmanager
def _terminal(columns: int, lines: int) -> Iterator[TextIO]:
    """The writing end of a pseudo-terminal of that size (0 x 0: one not sized yet)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    try:
        with os.fdopen(follower, "w") as out:
            yield out
    finally:
        os.close(leader)


def test_a_terminal_s_own_size_wins_over_exported_columns_and_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    with _terminal(60, 8) as out:
        assert Screen(out=out).size() == (60, 8)
    # A terminal of no size yet (docker exec -t before its first resize): the variables say it.
    with _terminal(0, 0) as out:
        assert Screen(out=out).size() == (80, 24)
