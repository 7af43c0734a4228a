"""The embedded SQLite history keeps the rollback journal (readers need read access only, as
Grafana's SQLite plugin has): a reader in the middle of a read (``sparkwatch history``,
``doctor``, Grafana, on the file the demo writes) delays the writer's commit instead of
failing it."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sqlalchemy as sa

from sparkwatch.history.engine import SQLITE_WRITER_BUSY_SECONDS, create_engine
from sparkwatch.history.writer import HistoryWriter
from tests.support import wait_for
from tests.test_history_support import batch_of, counts, load_sample, progress, started, write

RAW = load_sample("window_agg")
QUERY, RUN = RAW["id"], RAW["runId"]


def _first_batch(url: str) -> None:
    write(url, started(QUERY, RUN, "window_agg", "2026-11-21T09:33:00.000Z"),
          progress(batch_of(RAW, 1, "2026-11-21T09:33:50.000Z")))


def test_the_history_file_keeps_the_rollback_journal_and_its_writer_waits_a_minute_for_locks(
    sqlite_url: str, tmp_path: Path
) -> None:
    _first_batch(sqlite_url)
    with sqlite3.connect(tmp_path / "history.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert busy_timeout_ms(create_engine(sqlite_url)) == 5_000  # a reader hears Ctrl-C sooner
    writer = HistoryWriter(sqlite_url)
    engine = writer._ready_engine()  # the engine its writes go through
    assert busy_timeout_ms(engine) == SQLITE_WRITER_BUSY_SECONDS * 1000 == 60_000


def busy_timeout_ms(engine: sa.Engine) -> int:
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("PRAGMA busy_timeout")).scalar_one())
    finally:
        engine.dispose()


def test_a_reader_inside_a_read_delays_the_writer_and_does_not_fail_it(
    sqlite_url: str, tmp_path: Path
) -> None:
    _first_batch(sqlite_url)
    db = tmp_path / "history.db"
    reader = sqlite3.connect(db, isolation_level=None)
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM batches").fetchone() == (1,)
        with ThreadPoolExecutor(1) as pool:
            writing = pool.submit(write, sqlite_url,
                                  progress(batch_of(RAW, 2, "2026-11-21T09:33:52.000Z")))
            # The writer has its rows in the journal and waits for the reader to commit.
            wait_for(lambda: db.with_name("history.db-journal").exists(), 30,
                     "the writer's journal")
            assert not writing.done()
            assert reader.execute("SELECT count(*) FROM batches").fetchone() == (1,)
            reader.execute("COMMIT")
            writing.result(timeout=30)
    finally:
        reader.close()
    assert counts(sqlite_url)["batches"] == 2
