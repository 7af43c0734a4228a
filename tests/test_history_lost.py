"""Runs of a driver that died end as lost instead of staying "running" for ever."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sparkwatch.collector.stalls import LostRuns
from sparkwatch.history import lost
from sparkwatch.history.writer import HistoryWriter
from tests.test_history_support import (
    batch_of,
    engine_for,
    fetch,
    load_sample,
    migrated_database,
    progress,
    started,
    terminated,
    utc,
    write,
)

T0 = "2026-11-20T10:00:00.000Z"
T1 = "2026-11-20T10:05:00.000Z"
T2 = "2026-11-20T11:00:00.000Z"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from migrated_database(request)


def run_of(url: str, run_id: str) -> dict[str, Any]:
    [run] = fetch(url, "query_runs", run_id)
    return run


def a_run(url: str, query_id: str, at: str = T0, last: str = T1) -> str:
    """A run that started at ``at`` and reported a batch at ``last``; returns its id."""
    run_id = str(uuid.uuid4())
    raw = batch_of(load_sample("stream_stream_join_rocksdb"), 0, last, id=query_id, runId=run_id)
    write(url, started(query_id, run_id, "orders", at), progress(raw))
    return run_id


def test_a_new_run_of_a_query_ends_its_earlier_running_run_as_lost(db_url: str) -> None:
    query_id = str(uuid.uuid4())
    old = a_run(db_url, query_id)
    new_run = str(uuid.uuid4())
    write(db_url, started(query_id, new_run, "orders", T2))
    assert (run_of(db_url, old)["status"], run_of(db_url, old)["ended_at"]) == ("lost", utc(T1))
    assert (run_of(db_url, new_run)["status"], run_of(db_url, new_run)["ended_at"]) == (
        "running", None)


def test_a_replayed_older_start_does_not_end_the_newer_run(db_url: str) -> None:
    query_id = str(uuid.uuid4())
    old = a_run(db_url, query_id)
    newer = a_run(db_url, query_id, at=T2, last=T2)
    write(db_url, started(query_id, old, "orders", T0))  # the spool replays the old start
    assert run_of(db_url, newer)["status"] == "running"
    assert run_of(db_url, old)["status"] == "lost"


def test_an_ended_run_stays_ended_when_the_query_starts_again(db_url: str) -> None:
    query_id = str(uuid.uuid4())
    old = a_run(db_url, query_id)
    write(db_url, terminated(query_id, old, "2026-11-20T10:06:00Z", exception="boom"))
    a_run(db_url, query_id, at=T2, last=T2)
    assert (run_of(db_url, old)["status"], run_of(db_url, old)["exception"]) == ("failed", "boom")


def test_a_silent_run_ends_as_lost_and_runs_again_when_it_speaks(db_url: str) -> None:
    query_id = str(uuid.uuid4())
    run_id = a_run(db_url, query_id)
    with engine_for(db_url).begin() as conn:
        lost.end_silent(conn, utc(T1) + timedelta(hours=2), silent_seconds=3600)
    assert (run_of(db_url, run_id)["status"], run_of(db_url, run_id)["ended_at"]) == (
        "lost", utc(T1))
    later = batch_of(load_sample("stream_stream_join_rocksdb"), 1, "2026-11-20T12:10:00.000Z",
                     id=query_id, runId=run_id)
    write(db_url, progress(later))
    assert (run_of(db_url, run_id)["status"], run_of(db_url, run_id)["ended_at"]) == (
        "running", None)


def test_a_run_that_reports_within_the_threshold_stays_running(db_url: str) -> None:
    run_id = a_run(db_url, str(uuid.uuid4()))
    with engine_for(db_url).begin() as conn:
        ended = LostRuns(silent_seconds=3600)(conn, utc(T1) + timedelta(minutes=59))
    assert run_of(db_url, run_id)["status"] == "running"
    assert ended == (0, 0)


def test_the_drivers_rollup_tick_ends_runs_silent_past_its_threshold(db_url: str) -> None:
    run_id = a_run(db_url, str(uuid.uuid4()))
    now = datetime.now(UTC)
    w = HistoryWriter(db_url, lost_after_seconds=(now - utc(T1)).total_seconds() - 60)
    try:
        w.write([progress(batch_of(load_sample("stream_stream_join_rocksdb"), 5, T1,
                                   runId=str(uuid.uuid4())))])  # migrates first
        assert w.roll_up(now, interval_seconds=3600 * 24 * 365)
    finally:
        w.close()
    assert run_of(db_url, run_id)["status"] == "lost"


def test_lost_is_not_applied_across_tenants(db_url: str) -> None:
    query_id = str(uuid.uuid4())
    old = a_run(db_url, query_id)
    with engine_for(db_url).begin() as conn:
        ended = lost.end_replaced(conn, [{"tenant": "other", "query_id": query_id,
                                         "run_id": "x", "started_at": utc(T2)}])
    assert ended == 0
    assert run_of(db_url, old)["status"] == "running"
