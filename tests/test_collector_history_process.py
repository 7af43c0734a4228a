"""The history writer's child process: it reads spooled records itself, writes them in order,
answers with the position after them, and survives its own death and the database's."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.collector.history_process import WriteFailed, WriterProcess, Written
from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.spool import Spool
from tests.test_collector_support import count_rows, fresh_ids, run_events

pytestmark = pytest.mark.postgres


def spooled_runs(spool: Spool, runs: int) -> list[list[dict[str, Any]]]:
    """``runs`` recorded runs under fresh ids, one spool record (one ingest request) each."""
    records = [run_events(**fresh_ids()) for _ in range(runs)]
    for record in records:
        spool.append(record)
    return records


@pytest.fixture
def spool(tmp_path: Path) -> Iterator[Spool]:
    spool = Spool(tmp_path / "spool", 1 << 26, fsync=False)
    yield spool
    spool.close()


@pytest.fixture
def process(pg_url: str, spool: Spool) -> Iterator[WriterProcess]:
    writer = WriterProcess(pg_url, migrate=True, spool_dir=spool.directory)
    yield writer
    writer.close()


def never() -> bool:
    return False


def write(writer: WriterProcess, spool: Spool, max_events: int) -> Written:
    written = writer.write(spool.cursor, spool.end, max_events, never)
    assert written is not None
    spool.commit(written.position)
    return written


def test_whole_records_are_written_in_order_and_the_answer_is_the_position_after_them(
    pg_url: str, spool: Spool, process: WriterProcess
) -> None:
    records = spooled_runs(spool, 3)
    per_run = len(records[0])
    batches_per_run = sum(e["kind"] == "progress" for e in records[0])

    first = write(process, spool, max_events=per_run + 1)  # two whole records, never a part

    assert first.events == 2 * per_run
    assert count_rows(pg_url, "SELECT count(*) FROM batches") == 2 * batches_per_run
    rest = write(process, spool, max_events=1000)
    assert rest.events == per_run and rest.position == spool.end and spool.is_empty()
    assert count_rows(pg_url, "SELECT count(*) FROM batches") == 3 * batches_per_run
    assert count_rows(pg_url, "SELECT count(*) FROM query_runs") == 3


def test_a_killed_writer_process_costs_at_most_one_failed_attempt_then_a_new_one_writes(
    pg_url: str, spool: Spool, process: WriterProcess
) -> None:
    records = spooled_runs(spool, 2)
    write(process, spool, max_events=len(records[0]))
    first_pid = process.pid
    assert first_pid is not None
    os.kill(first_pid, signal.SIGKILL)

    try:  # the attempt that finds it dying fails (as one of the pump's retries would)
        write(process, spool, max_events=1000)
    except WriteFailed as exc:
        assert "history writer process ended" in str(exc)
        write(process, spool, max_events=1000)

    assert process.pid not in (None, first_pid) and spool.is_empty()
    assert count_rows(pg_url, "SELECT count(*) FROM query_runs") == 2


def test_a_database_error_is_one_failed_attempt_and_the_records_stay_for_the_next(
    tmp_path: Path, spool: Spool
) -> None:
    spooled_runs(spool, 1)
    closed_port = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"
    writer = WriterProcess(closed_port, migrate=True, spool_dir=spool.directory)
    try:
        with pytest.raises(WriteFailed, match="127.0.0.1"):
            writer.write(spool.cursor, spool.end, 1000, never)
        pid = writer.pid
        with pytest.raises(WriteFailed):  # the same child answers again: it does not retry
            writer.write(spool.cursor, spool.end, 1000, never)
        assert writer.pid == pid and not spool.is_empty()
    finally:
        writer.close()


def test_stopping_during_a_write_ends_the_child_and_answers_none(
    spool: Spool, pg_url: str
) -> None:
    spooled_runs(spool, 1)
    writer = WriterProcess(pg_url, migrate=True, spool_dir=spool.directory)
    try:
        assert writer.write(spool.cursor, spool.end, 1000, lambda: True) is None
        assert writer.pid is None
    finally:
        writer.close()


def test_a_spooled_event_that_no_longer_parses_is_logged_and_quarantined(
    pg_url: str, spool: Spool, process: WriterProcess, capfd: pytest.CaptureFixture[str]
) -> None:
    good = run_events(**fresh_ids())
    broken = {**good[1], "payload": {**good[1]["payload"], "batchId": "not a number"}}
    spool.append([good[0], broken, *good[2:]])

    written = write(process, spool, max_events=1000)

    assert (written.events, written.quarantined) == (len(good) - 1, 1)
    [entry] = Quarantine(spool.directory).entries()
    assert entry.event == broken and "progress.batchId" in entry.reason
    logged = capfd.readouterr().err
    assert re.search(r"^\S+ \S+ ERROR sparkwatch\.collector\.history_process: a spooled "
                     r"event no longer parses: progress\.batchId", logged, re.M), logged
