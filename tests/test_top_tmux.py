"""`sparkwatch top` on a real 80×24 terminal (tmux): the mark follows the query through a
re-sort, Enter opens the marked query, a frame as tall as the screen never scrolls it, and names
of wide (Japanese) characters keep to their column."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from sparkwatch.history import migrate
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.terminal import display_width
from tests.conftest import unavailable
from tests.doctor_support import SCENARIOS, events_of, load, recorded
from tests.support import wait_for
from tests.test_terminal_width import WIDE, end_of

WIDTH, HEIGHT = 80, 24


class Tmux:
    """One detached tmux session of its own (its own server socket) running a command."""

    def __init__(self, command: list[str]) -> None:
        self.socket = f"sparkwatch-test-{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "TERM": "xterm"}
        self._tmux("new-session", "-d", "-x", str(WIDTH), "-y", str(HEIGHT),
                   shlex.join(command), env=env)

    def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, check=True, env=env, timeout=30)
        return done.stdout

    def screen(self) -> list[str]:
        return self._tmux("capture-pane", "-p").splitlines()

    def scrolled_lines(self) -> int:
        return int(self._tmux("display-message", "-p", "#{history_size}").strip())

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30)


@pytest.fixture()
def top(sqlite_url: str) -> Iterator[Tmux]:
    migrate.upgrade(sqlite_url)
    load(sqlite_url, SCENARIOS)
    load_copies(sqlite_url, 2)
    with top_on(sqlite_url) as session:
        yield session


@contextmanager
def top_on(url: str) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        unavailable("tmux not installed (apt-get install tmux)")
    session = Tmux([sys.executable, "-m", "sparkwatch.cli.main", "top", "--url", url,
                    "--interval", "0.3", "--sort", "name"])
    try:
        yield session
    finally:
        session.close()


def load_copies(url: str, copies: int, prefix: str = "") -> None:
    """The recorded runs again as other apps' queries (named ``prefix``, the run's name, the
    copy's number): more rows than an 80×24 screen holds."""
    writer = HistoryWriter(url)
    try:
        for copy in range(copies):
            for name in SCENARIOS:
                data = recorded(name)
                ids = {"id": str(uuid.uuid4()), "runId": str(uuid.uuid4())}
                for event in data["events"]:
                    payload = json.loads(event["json"])
                    fields = payload.get("progress", payload)  # progress comes wrapped
                    fields.update(ids, name=f"{prefix}{name}_{copy}")
                    event["json"] = json.dumps(payload)
                data["app"]["id"] = f"{data['app']['id']}-copy{copy}"
                writer.write(events_of(data))
    finally:
        writer.close()


def marked(screen: list[str]) -> str | None:
    """The name of the query row marked with '>'."""
    row = next((line for line in screen if line.startswith("> ")), None)
    return row[2:].split()[0] if row else None


def shows(session: Tmux, text: str) -> bool:
    return any(text in line for line in session.screen())


def test_enter_opens_the_marked_query_after_a_re_sort(top: Tmux) -> None:
    wait_for(lambda: shows(top, "QUERY / OPERAT"), 30, "the table")
    top.keys("Down", "Down")
    third = sorted([*SCENARIOS, *(f"{n}_{c}" for n in SCENARIOS for c in range(2))])[2]
    wait_for(lambda: marked(top.screen()) == third, 30, "the third row marked")
    chosen = marked(top.screen())
    top.keys("s")  # by state rows: the marked query moves, the mark goes with it
    wait_for(lambda: shows(top, "sort: rows"), 30, "sort by rows")
    assert marked(top.screen()) == chosen
    top.keys("Enter")
    wait_for(lambda: shows(top, f"query {chosen}"), 30, f"the detail of {chosen}")
    assert shows(top, "(esc: back to the list)")


def test_an_80_by_24_screen_is_redrawn_in_place(top: Tmux) -> None:
    wait_for(lambda: shows(top, "more"), 30, "a frame cut to the screen's height")
    first = top.screen()[0]
    assert first.startswith("sparkwatch top")
    for _ in range(5):  # each refresh (0.3 s) redraws the whole frame
        seen = top.screen()[0]
        wait_for(lambda seen=seen: top.screen()[0] != seen, 30, "the next refresh")
    assert top.screen()[0].startswith("sparkwatch top")
    assert top.scrolled_lines() == 0


def test_a_resized_window_is_drawn_to_its_new_size_despite_exported_lines_and_columns(
        sqlite_url: str) -> None:
    # shutil.get_terminal_size reads $COLUMNS and $LINES before the terminal: exported (a
    # profile, a tool's child environment: pytest-xdist's workers have 80 and 24), every frame
    # kept that size, and a window made smaller was drawn past its edge and scrolled.
    migrate.upgrade(sqlite_url)
    load(sqlite_url, SCENARIOS)
    load_copies(sqlite_url, 2)
    session = Tmux(["env", "LINES=24", "COLUMNS=80", sys.executable, "-m", "sparkwatch.cli.main",
                    "top", "--url", sqlite_url, "--interval", "0.3"])
    try:
        wait_for(lambda: shows(session, "more"), 30, "a frame cut to the screen's height")
        session._tmux("resize-window", "-x", "60", "-y", "8")
        wait_for(lambda: session.screen()[0].startswith("sparkwatch top")
                 and session.screen()[-1].startswith("... "), 30,
                 "a frame of 8 lines, the last saying how many more")
        screen = session.screen()
        assert len(screen) == 8 and all(display_width(line) <= 60 for line in screen), screen
    finally:
        session.close()


def test_wide_names_keep_to_their_column_on_a_real_terminal(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url)
    load_copies(sqlite_url, 1, prefix=WIDE)  # 60 columns of Japanese before each run's name
    with top_on(sqlite_url) as session:
        wait_for(lambda: shows(session, "注文"), 30, "the queries of wide names")
        screen = session.screen()
    header = next(line for line in screen if "STATUS" in line)
    rows = [line for line in screen if line.startswith(("> 注文", "  注文"))]
    assert len(rows) == len(SCENARIOS), screen
    # Cut to the name column, each status ends where the header's title does: no row ran past
    # the screen's edge into the next line.
    assert {end_of(row, "terminated") for row in rows} == {end_of(header, "STATUS")}, screen
