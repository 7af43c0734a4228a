"""Runs of a driver that died end as lost instead of staying "running" for ever."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.stalls import LostRuns, StallDetection
from sparkwatch.history import lost
from sparkwatch.history.schema import QueryStall
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import ParsedEvent
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
NOW = utc("2026-11-20T12:00:00.000Z")


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


def ago(seconds: float) -> str:
    """The time ``seconds`` before :data:`NOW`, as Spark stamps its events."""
    return (NOW - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def batches(query_id: str, run_id: str, seconds_ago: Mapping[int, float]) -> list[ParsedEvent]:
    """Progress of ``run_id``: batch id -> seconds before :data:`NOW` it was stamped."""
    sample = load_sample("stream_stream_join_rocksdb")
    return [progress(batch_of(sample, batch_id, ago(s), id=query_id, runId=run_id))
            for batch_id, s in seconds_ago.items()]


def open_stalls(url: str, run_id: str) -> int:
    s = QueryStall.__table__.c
    with engine_for(url).connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).where(
            s.run_id == run_id, s.cleared_at.is_(None))).scalar_one())


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


def test_a_driver_whose_clock_jumped_years_ahead_ends_no_run_heard_just_now(
    db_url: str,
) -> None:
    """Its rollup tick measured every run's silence up to its own clock: each driver's run on
    the shared history ended as lost. It now acts at the database's time (history/clock.py)."""
    now = datetime.now(UTC)
    heard = batch_of(load_sample("stream_stream_join_rocksdb"), 1,
                     now.strftime("%Y-%m-%dT%H:%M:%S.000Z"), id=str(uuid.uuid4()),
                     runId=str(uuid.uuid4()))
    write(db_url, progress(heard))
    w = HistoryWriter(db_url, lost_after_seconds=3600)
    try:
        w.write([progress(batch_of(load_sample("stream_stream_join_rocksdb"), 5, T1,
                                   runId=str(uuid.uuid4())))])  # migrates first
        # A slot length of its own: no other test's claim takes this tick's slot.
        assert w.roll_up(now + timedelta(days=3 * 365), interval_seconds=3600 * 24 * 364)
    finally:
        w.close()
    assert run_of(db_url, heard["runId"])["status"] == "running"


def test_lost_is_not_applied_across_tenants(db_url: str) -> None:
    query_id = str(uuid.uuid4())
    old = a_run(db_url, query_id)
    with engine_for(db_url).begin() as conn:
        ended = lost.end_replaced(conn, [{"tenant": "other", "query_id": query_id,
                                         "run_id": "x", "started_at": utc(T2)}])
    assert ended == 0
    assert run_of(db_url, old)["status"] == "running"


def test_a_late_batch_of_a_replaced_run_is_stored_but_does_not_revive_it(db_url: str) -> None:
    query_id, first, second = (str(uuid.uuid4()) for _ in range(3))
    write(db_url, started(query_id, first, "orders", ago(32)),
          *batches(query_id, first, {0: 30, 1: 28, 2: 26, 3: 24, 4: 22}))
    write(db_url, started(query_id, second, "orders", ago(10)),
          *batches(query_id, second, {0: 8, 1: 6, 2: 4, 3: 2}))
    assert run_of(db_url, first)["status"] == "lost"
    # Batch 5 of the first run, stamped before the second run started, arrives only now: the
    # run is still lost, last seen (its end) at that batch, as a run ends no earlier than its
    # latest event.
    write(db_url, *batches(query_id, first, {5: 20}))
    assert (run_of(db_url, first)["status"], run_of(db_url, first)["ended_at"]) == (
        "lost", NOW - timedelta(seconds=20))
    assert [b["batch_id"] for b in fetch(db_url, "batches", first)] == [0, 1, 2, 3, 4, 5]
    assert (run_of(db_url, second)["status"], run_of(db_url, second)["ended_at"]) == (
        "running", None)
    # Had it run again, 20 s of silence after batches every 2 s would be a stall (>= 10 s).
    with engine_for(db_url).begin() as conn:
        StallDetection(intervals=5, min_seconds=5, horizon_days=7)(conn, NOW)
    assert (open_stalls(db_url, first), open_stalls(db_url, second)) == (0, 0)


def test_a_silent_run_stays_lost_when_it_speaks_after_its_query_started_again(
    db_url: str,
) -> None:
    query_id, first, second = (str(uuid.uuid4()) for _ in range(3))
    write(db_url, *batches(query_id, first, {0: 7200}))  # no QueryStarted: attached mid-run
    with engine_for(db_url).begin() as conn:
        lost.end_silent(conn, NOW - timedelta(seconds=60), silent_seconds=3600)
    write(db_url, started(query_id, second, "orders", ago(30)))
    write(db_url, *batches(query_id, first, {1: 10}))
    assert run_of(db_url, first)["status"] == "lost"
    assert run_of(db_url, second)["status"] == "running"


def test_a_silent_run_runs_again_when_it_speaks_though_an_earlier_run_of_its_query_was_lost(
    db_url: str,
) -> None:
    query_id, earlier = str(uuid.uuid4()), str(uuid.uuid4())
    write(db_url, started(query_id, earlier, "orders", ago(9000)))
    run_id = str(uuid.uuid4())
    write(db_url, started(query_id, run_id, "orders", ago(8000)),
          *batches(query_id, run_id, {0: 7200}))
    with engine_for(db_url).begin() as conn:
        lost.end_silent(conn, NOW - timedelta(seconds=60), silent_seconds=3600)
    assert (run_of(db_url, earlier)["status"], run_of(db_url, run_id)["status"]) == (
        "lost", "lost")
    write(db_url, *batches(query_id, run_id, {1: 10}))
    assert (run_of(db_url, run_id)["status"], run_of(db_url, run_id)["ended_at"]) == (
        "running", None)
    assert run_of(db_url, earlier)["status"] == "lost"
