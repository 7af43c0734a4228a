"""Ctrl-C and SIGTERM stop `sparkwatch history` at once in the middle of a long SQLite statement.

SQLite runs a statement in C: Python hears a signal only once the statement returns, and a page
far down a history of millions of rows (``--offset``) took seconds to, after Ctrl-C. Real
processes, on a history of 3 million state rows made in SQL (the writer would take minutes).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from sparkwatch.history import migrate
from sparkwatch.history.reader import HistoryReader
from tests.support import wait_for
from tests.test_cli_signals import has_open, sparkwatch

ROWS = 3_000_000  # ~4 s to build; the page past them takes ~4 s of CPU on an idle machine
STOPPED_WITHIN = 3.0
"""Seconds from the signal to the exit (the interpreter's end and coverage's save
included): a stop at once on a loaded machine, where the scan left runs on for seconds more."""
RUNS_FOR = 0.3  # CPU seconds into the scan before the signal is sent


@pytest.fixture(scope="module")
def big_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("big") / "history.db"
    migrate.upgrade(f"sqlite:///{db}")
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA journal_mode=OFF")  # made once, for reading: no need to be safe
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute(
            "INSERT INTO query_runs (run_id, query_id, name, app_name, app_id, spark_version, "
            "status, last_event_at, batches) VALUES ('run-1', 'query-1', 'big', 'app', 'app-1', "
            "'3.5.0', 'running', '2026-11-21 09:00:00.000000', 0)")
        conn.execute(
            "INSERT INTO operator_batches WITH RECURSIVE n(i) AS "
            f"(SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS - 1}) "
            "SELECT 'run-1', i, 0, 'query-1', "
            "strftime('%Y-%m-%d %H:%M:%S.000000', 1700000000 + i, 'unixepoch'), 'agg', "
            "i, 0, 0, 0, 0, 0, 0, 0, 0, 0, '{}' FROM n")
        conn.commit()
    return db


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scanning(pid: int, db: Path) -> Iterator[bool]:
    """True once ``pid`` has the history open and has spent :data:`RUNS_FOR` CPU seconds since:
    the reads before the page (schema, query, operators) take milliseconds, the page seconds."""
    opened_at: float | None = None
    while True:
        if opened_at is None and has_open(pid, db):
            opened_at = cpu_seconds(pid)
        yield opened_at is not None and cpu_seconds(pid) - opened_at >= RUNS_FOR


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_long_sqlite_page_at_once(big_history: Path, tmp_path: Path,
                                                   sig: signal.Signals) -> None:
    argv = ["history", "state", "big", "--offset", "100000000", "--url", f"sqlite:///{big_history}"]
    with sparkwatch(tmp_path, *argv) as history:
        probe = scanning(history.proc.pid, big_history)
        wait_for(lambda: next(probe), 60, "the history scanning its page")
        assert history.proc.poll() is None, "the page ended before the signal"
        sent = time.monotonic()
        history.send(sig)
        history.ends_cleanly(sig, within=STOPPED_WITHIN)
        assert time.monotonic() - sent < STOPPED_WITHIN
    assert history.out.read_text() == ""


class Asked(Exception):
    """What this test's SIGTERM handler raises, as the command's raises its stop."""


def paging(thread: int) -> bool:
    """Whether ``thread`` is in SQLite running the page past the rows (SQLAlchemy's execute of
    it is its innermost Python frame)."""
    frame = sys._current_frames().get(thread)
    return (frame is not None and frame.f_code.co_name == "do_execute"
            and "OFFSET" in str(frame.f_locals.get("statement")))


def test_a_signal_mid_statement_is_raised_by_its_own_handler_once_sqlite_stops(
    big_history: Path,
) -> None:
    def asked(signum: int, frame: object) -> None:
        raise Asked(signum)

    def send_mid_page() -> None:
        wait_for(lambda: paging(main), 30, "the reader paging")
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    main, sent = threading.get_ident(), []
    before = signal.signal(signal.SIGTERM, asked)
    sender = threading.Thread(target=send_mid_page)
    try:
        sender.start()
        with pytest.raises(Asked) as raised, HistoryReader(f"sqlite:///{big_history}") as reader:
            reader.state("big", offset=100_000_000)
        stopped = time.monotonic()
        sender.join()
        assert stopped - sent[0] < STOPPED_WITHIN
        assert raised.value.args == (signal.SIGTERM,)
        assert "interrupted" in str(raised.value.__context__)  # how SQLite stopped
        assert signal.getsignal(signal.SIGTERM) is asked  # the reader's own is gone
    finally:
        # Its SIGTERM sent (or given up on) before the default is back: a late one would end
        # this process, the test worker.
        sender.join(timeout=60)
        signal.signal(signal.SIGTERM, before)
