"""What apps and the network send (names, errors, reasons) reaches a terminal as text, never as
terminal commands: an ESC, an OSC title, a CR, a newline, a C1 control or a bidi override in a
stored name is shown escaped by every text output (history tables, top, doctor, the quarantine
list, errors, logs), and a long name does not pad every row."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest

from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from sparkwatch.logs import LOG_FORMAT, OneLineFormatter
from sparkwatch.terminal import clip, printable
from tests.support import run_cli
from tests.test_history_reader import AGG
from tests.test_history_support import batch_of, progress, started, terminated, write

# Each would act on a terminal: set its title, clear it, return to the line's start and
# overwrite, forge a line, reverse what follows, start a CSI through the 8-bit C1 form.
ATTACKS = ("\x1b]0;pwned\x07", "\x1b[2J", "\rforged", "\nforged line", "\u202egnp.exe",
           "\x9b31m", "\x7f", "\u2066")
ACTIVE = ("\x1b", "\x07", "\r", "\x9b", "\u202e", "\u2066", "\x7f")
NAME = ("evil" + "".join(ATTACKS)).ljust(256, "x")  # the longest name an event may hold
HUGE = NAME + "x" * 100_000  # in a quarantined event, which was refused for far less
QUERY_ID, RUN_ID = "e0000000-0000-4000-8000-00000000000e", "e0000000-0000-4000-8000-0000000000f0"


def _inert(text: str) -> None:
    assert not any(c in text for c in ACTIVE), [c for c in ACTIVE if c in text]


def test_printable_escapes_what_a_terminal_would_act_on_and_keeps_the_rest() -> None:
    assert printable("orders-etl ünïcode 😀 日本") == "orders-etl ünïcode 😀 日本"
    assert printable("a\x1b[2Jb\rc\nd\x9be\u202ef\ud800g\x00") == (
        "a\\x1b[2Jb\\x0dc\\x0ad\\x9be\\u202ef\\ud800g\\x00")
    assert printable("\U000e0041") == "\\U000e0041"  # a tag character: invisible


def test_clip_cuts_the_escaped_text_to_the_width() -> None:
    assert clip("\x1b" * 10, 9) == "\\x1b\\x1b…"
    assert len(clip(HUGE, 80)) == 80


@pytest.fixture
def hostile_history(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    migrate.upgrade(url)
    at = "2026-11-21T09:00:00.000Z"
    write(url, started(QUERY_ID, RUN_ID, NAME, at),
          progress(batch_of(AGG, 0, at, id=QUERY_ID, runId=RUN_ID, name=NAME)),
          terminated(QUERY_ID, RUN_ID, "2026-11-21T09:01:00.000Z",
                     "boom\x1b[31m\rforged\n\tat X", "STREAM\x1b[2JFAILED"))
    return url


@pytest.mark.parametrize("command", [
    ("history", "queries"), ("history", "runs", QUERY_ID), ("history", "state", QUERY_ID),
])
def test_history_tables_show_a_hostile_name_escaped_and_cut(
    hostile_history: str, capsys: pytest.CaptureFixture[str], command: tuple[str, ...],
) -> None:
    code, out, _ = run_cli(capsys, *command, "--url", hostile_history)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2  # the header and one row: no line forged
    _inert(out)
    assert max(map(len, lines)) < 400
    if command[1] == "queries":
        assert "evil\\x1b]0;pwned\\x07\\x1b[2J\\x0dforged\\x0aforged line\\u202egnp" in out


def test_the_run_error_is_shown_escaped(hostile_history: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "history", "runs", QUERY_ID, "--url", hostile_history)
    assert out.splitlines()[1].endswith("STREAM\\x1b[2JFAILED: boom\\x1b[31m")


def test_top_once_shows_a_hostile_name_escaped(hostile_history: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "top", "--url", hostile_history, "--once")
    assert code == 0
    _inert(out)
    assert sum("evil" in line for line in out.splitlines()) == 1


def test_doctor_text_shows_a_hostile_name_escaped(hostile_history: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, "doctor", "--url", hostile_history)
    _inert(out)
    assert out.splitlines()[1].startswith("  evil\\x1b]0;pwned\\x07")


def test_quarantine_list_shows_what_a_client_sent_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    event = {"kind": "progress\x1b[2J", "app": {"name": HUGE}, "payload": {"id": "q\rforged"}}
    Quarantine(tmp_path).add([(event, "refused: \x1b]0;pwned\x07")], ["acme"])
    code, out, _ = run_cli(capsys, "quarantine", "list", "--spool-dir", str(tmp_path))
    assert code == 0
    [entry, total] = out.splitlines()
    _inert(entry)
    assert "query=q\\x0dforged" in entry and entry.endswith("refused: \\x1b]0;pwned\\x07")
    assert len(entry) < 400 and total == "1 quarantined event"


def test_an_error_quoting_what_it_refuses_shows_it_escaped(
    hostile_history: str, capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run_cli(capsys, "history", "runs", "no\x1b[2Jsuch\rquery",
                           "--url", hostile_history)
    assert code == 2
    [line] = err.splitlines()
    _inert(line)
    assert "no\\x1b[2Jsuch\\rquery" in line


def test_a_log_record_quoting_a_client_stays_one_line_and_a_traceback_keeps_its_lines() -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(OneLineFormatter(LOG_FORMAT))
    log = logging.getLogger("sparkwatch.test.oneline")
    log.addHandler(handler)
    try:
        log.warning("refused %s", "x\n2026-11-28 00:00:00,000 ERROR forged: \x1b[2J")
        try:
            raise ValueError("ours")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    refused, failed, *trace = out.getvalue().splitlines()
    assert refused.endswith("refused x\\x0a2026-11-28 00:00:00,000 ERROR forged: \\x1b[2J")
    assert failed.endswith("failed") and trace[0] == "Traceback (most recent call last):"
    assert trace[-1] == "ValueError: ours"
