"""The collector's jobs held up, on real databases and a real collector: a long read of the raw
tables (a dashboard's query, pg_dump) that retention's partition DDL would wait for leaves the
history, the jobs and the read API running, and the job defers the DDL; SIGTERM while retention
works through a large backlog ends the collector within seconds, what was deleted committed."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate, partitions
from tests.support import session_holding, wait_for
from tests.test_collector_jobs import job_counts, progress_at, write
from tests.test_collector_support import (
    Collector,
    count_rows,
    envelope,
    fresh_ids,
    running,
    scalar,
)

FAST_JOBS = ("--retention-interval-seconds", "1", "--rollup-interval-seconds", "1",
             "--stall-check-seconds", "1")


@contextmanager
def long_read_of_batches(url: str) -> Iterator[None]:
    """A transaction that read ``batches`` and stays open (ACCESS SHARE on every partition until
    it ends), as a dashboard's long query or pg_dump holds it."""
    with session_holding(url, "SELECT count(*) FROM batches"):
        yield


def bounded_count(url: str, sql: str, **params: object) -> int:
    """A count for ``wait_for`` that waits a second at most in PostgreSQL's lock queue (where
    everything stood behind the DROP), -1 when it would wait longer."""
    engine = sa.create_engine(url, connect_args={"options": "-c lock_timeout=1000"})
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(sql), params).scalar_one())
    except sa.exc.OperationalError:
        return -1
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_long_read_of_batches_holds_up_neither_the_history_nor_the_reads_and_retention_defers(
    pg_url: str, tmp_path: Path,
) -> None:
    """Retention's DROP of a due day waited for its ACCESS EXCLUSIVE lock behind the reader
    without a timeout, and PostgreSQL queued every later statement on ``batches`` behind it: no
    acknowledged batch reached the history and the read API timed out until the reader let go,
    while APScheduler logged its "maximum number of running instances" at every tick."""
    migrate.upgrade(pg_url)
    due_day = datetime.now(UTC) - timedelta(days=3)
    write(pg_url, progress_at([due_day + timedelta(seconds=s) for s in range(5)], **fresh_ids()))
    due = partitions.partition_name("batches", due_day)
    assert scalar(pg_url, "SELECT to_regclass(:t)", t=due) is not None
    ids = fresh_ids()
    now = datetime.now(UTC)
    events = [envelope("progress", p)
              for p in progress_at([now + timedelta(seconds=s) for s in range(5)], **ids)]
    collector = Collector(pg_url, tmp_path / "spool", *FAST_JOBS, "--retention-days", "1")

    def written() -> int:
        return bounded_count(pg_url, "SELECT count(*) FROM batches WHERE run_id = :r",
                             r=ids["run_id"])

    def drop_waits() -> bool:
        return count_rows(pg_url, "SELECT count(*) FROM pg_stat_activity WHERE "
                          "wait_event_type = 'Lock' AND query LIKE 'DROP TABLE%'") > 0

    with long_read_of_batches(pg_url), running(collector):
        wait_for(drop_waits, 30, "retention's DROP of the due day to wait for the reader")
        assert collector.post(events).json()["accepted"] == len(events)
        wait_for(lambda: written() == len(events), 20,
                 "the acknowledged batches in the history while the reader holds batches")
        started = time.monotonic()
        assert collector.get("/api/v1/queries").status_code == 200
        assert time.monotonic() - started < 10, "the read API waited in the lock queue"
        assert scalar(pg_url, "SELECT to_regclass(:t)", t=due) is not None, "the reader holds it"
        assert job_counts(collector.metrics(), "failed").get("retention", 0) >= 1
        assert set(job_counts(collector.metrics(), "ran")) >= {"rollups", "stalls"}
        assert "job retention deferred" in collector.log_text()
        wait_for(lambda: collector.log_text().count("job retention deferred") >= 2, 30,
                 "a second deferred run")
    # The reader gone (the collector stopped with it), the next run drops the day.
    with running(Collector(pg_url, tmp_path / "spool", *FAST_JOBS, "--retention-days", "1")):
        wait_for(lambda: scalar(pg_url, "SELECT to_regclass(:t)", t=due) is None, 30,
                 "the due day dropped once nothing holds it")
    log = collector.log_text()
    warned = [line for line in log.splitlines()
              if "job retention deferred" in line and "WARNING" in line]
    assert len(warned) == 1, "a streak of deferred runs is one warning, the repeats are info"
    assert "maximum number of running instances" not in log


BACKLOG_BATCHES = 120_000
"""Due batches (and their operator, source and sink rows: 480,000 rows, 200 MB) that take
retention well over :data:`STOP_SECONDS` to delete, 1,000 rows a transaction (4 s here)."""
STOP_SECONDS = 2.5
"""The stop's bound here: the job ends at its next chunk (milliseconds), the collector in 0.2 s."""


def sqlite_backlog(url: str, path: Path) -> int:
    """A history whose ``BACKLOG_BATCHES`` batches are 5 days old: one run written by the
    history writer, copied in SQL under new batch ids (far quicker than pushing them)."""
    migrate.upgrade(url)
    ids = fresh_ids()
    write(url, progress_at([datetime.now(UTC) - timedelta(days=5)], **ids))
    db = sqlite3.connect(path)
    try:
        for table in ("batches", "operator_batches", "source_batches", "sink_batches"):
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            picked = ", ".join("batch_id + n" if c == "batch_id" else c for c in columns)
            db.execute(
                f"WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k "  # noqa: S608
                f"WHERE n < {BACKLOG_BATCHES - 1}) "
                f"INSERT INTO {table} ({', '.join(columns)}) SELECT {picked} FROM {table}, k")
        db.execute("UPDATE query_runs SET batches = (SELECT count(*) FROM batches)")
        db.commit()
        return int(db.execute("SELECT count(*) FROM operator_batches").fetchone()[0])
    finally:
        db.close()


def test_sigterm_while_retention_deletes_a_large_backlog_ends_the_collector_within_seconds(
    tmp_path: Path,
) -> None:
    """The stop let the job run on (the process waited for APScheduler's pool thread): 18.5 s
    for 400,000 rows, growing with the backlog, and a job even started after the server had
    stopped. Each chunk is its own transaction: what was deleted stays, counts exact."""
    path = tmp_path / "history.db"
    url = f"sqlite:///{path}"
    operators = sqlite_backlog(url, path)
    collector = Collector(url, tmp_path / "spool", "--retention-days", "1")

    def operator_rows() -> int:
        return count_rows(url, "SELECT count(*) FROM operator_batches")

    with running(collector):
        wait_for(lambda: operator_rows() < operators, 30, "retention to start deleting")
        assert collector.proc is not None
        proc = collector.proc
        stopped_at = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        took = time.monotonic() - stopped_at
        assert code == 128 + signal.SIGTERM, f"still running {took:.1f} s after SIGTERM"
    log = collector.log_text()
    assert "job retention stopped between two of its steps" in log
    assert " failed (will run again next interval)" not in log
    assert operator_rows() > 0, "stopped part way"
    left = int(scalar(url, "SELECT count(*) FROM batches"))
    assert int(scalar(url, "SELECT sum(batches) FROM query_runs")) == left, \
        "every batch deleted with its run's count"
