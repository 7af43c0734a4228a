"""A quarantine replayed: 6,000 entries of 1.5 KB each, written by the collector's own
Quarantine class, replayed by `sparkwatch quarantine replay` into a real PostgreSQL history.
Every entry reaches the history once and leaves the quarantine, and the file is read and written
a bounded number of times over, whatever the number of entries: the bytes this process read and
wrote, as the kernel counts them (/proc/self/io), stay within a few times the file's size. A
rewrite per batch of 100 entries read it 200 times over and wrote it 100 times over at 20,000
entries (170,000 entries: hours of I/O)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from tests.conftest import UNMEASURED
from tests.support import run_cli, wait_for
from tests.test_cli_quarantine import run_ids_written
from tests.test_collector_support import run_events

pytestmark = [pytest.mark.postgres, UNMEASURED]

ENTRIES = 6_000
"""Enough for the old code's rewrite per batch of 100 to read the file some 60 times over."""


def started_events(count: int) -> list[dict[str, Any]]:
    """``count`` readable events, each the start of a run of its own (one query_runs row)."""
    template = run_events(terminated=False)[0]
    return [{**template, "payload": {**template["payload"], "id": str(uuid.uuid4()),
                                     "runId": str(uuid.uuid4())}} for _ in range(count)]


def refusal(event: dict[str, Any]) -> str:
    """A reason as PostgreSQL gives one, with the failing row: the entry is about 1.5 KB."""
    row = json.dumps(event["payload"]) * 5
    return (f'new row for relation "query_runs" violates check constraint "no_poison" DETAIL: '
            f"Failing row contains ({row}).")


def io_counts() -> tuple[int, int]:
    """Bytes this process has passed to read and write calls on files (not to the database's
    socket, which libpq reads and writes with recv and send)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


def run_rows_written(url: str) -> tuple[int, int]:
    """The rows of query_runs PostgreSQL counts inserted, and updated."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            inserted, updated = conn.execute(sa.text(
                "select n_tup_ins, n_tup_upd from pg_stat_user_tables "
                "where relname = 'query_runs'")).one()
        return int(inserted), int(updated)
    finally:
        engine.dispose()


def test_a_full_quarantine_is_replayed_once_each_reading_and_writing_the_file_a_few_times_over(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if not Path("/proc/self/io").exists():
        pytest.skip("no /proc/self/io (the kernel's I/O accounting) on this system")
    migrate.upgrade(pg_url)
    events = started_events(ENTRIES)
    quarantine = Quarantine(tmp_path)
    for start in range(0, ENTRIES, 5_000):  # as the collector appends: a span at a time
        chunk = events[start:start + 5_000]
        assert quarantine.add([(e, refusal(e)) for e in chunk]) == len(chunk)
    size = quarantine.path.stat().st_size
    assert size > ENTRIES * 1_400
    read_before, written_before = io_counts()
    code, out, err = run_cli(capsys, "quarantine", "replay", "--spool-dir", str(tmp_path),
                             "--history-url", pg_url)
    read_after, written_after = io_counts()
    assert (code, out) == (0, f"replayed {ENTRIES} of {ENTRIES}\n"), err
    assert quarantine.scan() == ([], 0)
    assert quarantine.path.stat().st_size == 0
    assert run_ids_written(pg_url) == {e["payload"]["runId"] for e in events}
    # Each written once: as many rows inserted as runs, none written again (the upsert of a
    # run already there counts as an update). The server counts a session's rows once it
    # reports them (at the latest when it ends; the replay's sessions ended with it).
    wait_for(lambda: run_rows_written(pg_url)[0] >= ENTRIES, 30, "the server's count of rows",
             every=0.5)
    assert run_rows_written(pg_url) == (ENTRIES, 0)
    # Read once to list it; each entry once more, as its batch reads it under the lock; the
    # rewrites (each once its removed lines hold half the file) read twice what they copy, which
    # halves each time: about six times the file in all. Written about once.
    read, written = read_after - read_before, written_after - written_before
    assert read < 8 * size, f"read {read / size:.1f} times the file's {size} bytes"
    assert written < 2 * size, f"wrote {written / size:.1f} times the file's {size} bytes"
