"""A history writer whose partition creation another session held up (a long read of
``batches``, a dump) tries again within a minute, not once its batches reach the last day it
had meant to create: its rows wait in DEFAULT meanwhile, on a real PostgreSQL."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate, partitions, writer
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from tests.support import wait_for
from tests.test_collector_jobs import APP, progress_at
from tests.test_collector_jobs_held_up import long_read_of_batches
from tests.test_collector_support import fresh_ids, scalar

pytestmark = pytest.mark.postgres


def _exists(url: str, name: str) -> bool:
    return scalar(url, "SELECT to_regclass(:t)", t=name) is not None


def test_a_creation_held_up_by_a_reader_is_tried_again_after_the_retry_interval(
    pg_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    migrate.upgrade(pg_url)
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:  # a day ahead not made yet (as after DAYS_AHEAD days)
        for table in partitions.TABLES:
            conn.execute(sa.text(f"DROP TABLE {partitions.partition_name(table, tomorrow)}"))
    engine.dispose()
    missing = partitions.partition_name("batches", tomorrow)
    ids = fresh_ids()
    w = HistoryWriter(pg_url)

    def write(batch_id: int) -> None:
        [payload] = progress_at([datetime.now(UTC)], **ids)
        payload["batchId"] = batch_id
        w.write([parse_envelope(Envelope(EventKind.PROGRESS, APP, datetime.now(UTC).timestamp(),
                                         payload))])

    monkeypatch.setattr(writer, "PARTITIONS_RETRY", timedelta(seconds=2))
    batch = iter(range(1_000))
    try:
        with long_read_of_batches(pg_url):
            write(next(batch))  # written (today's partition exists); tomorrow's held up
            began = time.monotonic()
            write(next(batch))  # within the retry interval: not tried, no lock wait again
            assert time.monotonic() - began < partitions.LOCK_WAIT_SECONDS
        assert not _exists(pg_url, missing)
        # The reader gone: a write once the interval has passed creates the day. Before, none
        # did until the batches reached the last day the first attempt had meant to create.
        wait_for(lambda: (write(next(batch)), _exists(pg_url, missing))[1], 30,
                 "the held-up day created by a later write")
        assert scalar(pg_url, "SELECT count(*) FROM batches WHERE run_id = :r",
                      r=ids["run_id"]) == next(batch)
    finally:
        w.close()
