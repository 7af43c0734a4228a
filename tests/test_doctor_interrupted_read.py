"""Ctrl-C and SIGTERM stop doctor's own history reads at once in the middle of a long SQLite
statement, as they stop the reader's (``sparkwatch.history.interruptible``): doctor reads a run's
state rows on a connection of its own, which went on to the statement's end (a sort of every
state row of the run) before the stop was heard.

A history of 2 million state rows of one run, made in SQL (the writer would take minutes); the
signal is sent from a thread once the main thread runs doctor's statement."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from sparkwatch.doctor.history_source import load_records
from sparkwatch.history import migrate
from tests.support import wait_for

ROWS = 3_000_000  # ~4 s to build; doctor's sort of them takes over a second: time to catch it
STOPPED_WITHIN = 1.0  # seconds from the signal to the stop (it ends in a millisecond or so)


RUN = {"run_id": "'run-1'", "query_id": "'query-1'", "name": "'big'", "app_name": "'app'",
       "app_id": "'app-1'", "spark_version": "'3.5.0'", "status": "'running'",
       "last_event_at": "'2026-11-21 09:00:00.000000'", "batches": "1"}
BATCH = {"run_id": "'run-1'", "batch_id": "0", "query_id": "'query-1'",
         "timestamp": "'2026-11-21 09:00:00.000000'", "batch_duration_ms": "1",
         "num_input_rows": "1", "duration_ms": "'{}'", "observed_metrics": "'{}'"}
STATE_ROW = {"run_id": "'run-1'", "batch_id": "i", "operator_index": "0",
             "query_id": "'query-1'", "operator_name": "'agg'", "num_rows_total": "i",
             "timestamp": "strftime('%Y-%m-%d %H:%M:%S.000000', 1700000000 + i, 'unixepoch')",
             "custom_metrics": "'{}'"}
STATE_NUMBERS = ("num_rows_updated", "all_updates_time_ms", "num_rows_removed",
                 "all_removals_time_ms", "commit_time_ms", "memory_used_bytes",
                 "num_rows_dropped_by_watermark", "num_shuffle_partitions",
                 "num_state_store_instances")
"""The other columns of a state row, all 0."""


def _insert(table: str, values: dict[str, str], rows: str = "") -> str:
    """INSERT of one row of ``values`` (column: SQL expression), or of one for each ``i`` of
    ``rows`` (a recursive WITH counting them)."""
    source = f"{rows} SELECT {', '.join(values.values())}" + (" FROM n" if rows else "")
    return f"INSERT INTO {table} ({', '.join(values)}) {source}"


@pytest.fixture
def long_run(tmp_path: Path) -> Path:
    """A history whose one run has one batch and ROWS state rows from batch 0 on."""
    db = tmp_path / "history.db"
    migrate.upgrade(f"sqlite:///{db}")
    count = f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS - 1})"
    with closing(sqlite3.connect(db)) as conn:
        for pragma in ("journal_mode=OFF", "synchronous=OFF"):  # made once, for reading
            conn.execute(f"PRAGMA {pragma}")
        conn.execute(_insert("query_runs", RUN))
        conn.execute(_insert("batches", BATCH))
        conn.execute(_insert("operator_batches",
                             {**STATE_ROW, **dict.fromkeys(STATE_NUMBERS, "0")}, count))
        conn.commit()
    return db


class Asked(Exception):
    """What this test's SIGTERM handler raises, as the command's raises its stop."""


def _asked(signum: int, frame: object) -> None:
    raise Asked(signum)


def reading_state_rows(thread: int) -> bool:
    """Whether ``thread`` is in SQLite running doctor's read of the state rows (SQLAlchemy's
    execute of it is its innermost Python frame)."""
    frame = sys._current_frames().get(thread)
    return (frame is not None and frame.f_code.co_name == "do_execute"
            and "FROM operator_batches" in str(frame.f_locals.get("statement")))


@contextmanager
def sigterm_mid_read() -> Iterator[list[float]]:
    """SIGTERM raising :class:`Asked`, sent to this process once its main thread reads the state
    rows; yields the time it is sent at (once sent)."""
    main, sent = threading.get_ident(), []

    def send() -> None:
        wait_for(lambda: reading_state_rows(main), 60, "doctor reading the state rows",
                 every=0.005)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.signal(signal.SIGTERM, _asked)
    sender = threading.Thread(target=send)
    try:
        sender.start()
        yield sent
    finally:
        sender.join()
        signal.signal(signal.SIGTERM, before)


def test_a_signal_stops_doctors_long_read_of_state_rows_at_once(long_run: Path) -> None:
    with sigterm_mid_read() as sent:
        with pytest.raises(Asked) as raised:
            load_records(f"sqlite:///{long_run}")
        stopped = time.monotonic()
        assert raised.value.args == (signal.SIGTERM,)
        # Stopped mid-statement (SQLite's "interrupted"), not once the sort had ended.
        assert "interrupted" in str(raised.value.__context__)
        assert stopped - sent[0] < STOPPED_WITHIN
        assert signal.getsignal(signal.SIGTERM) is _asked  # doctor's own is gone
