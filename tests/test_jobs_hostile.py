"""The stall and lost-run jobs over histories at the edges of what is accepted, or written by an
older writer: a run's last event stored years ahead, a start stamped ahead by a driver's clock, a
run with a great many batches. On SQLite and PostgreSQL, through the collector's own job
objects."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.stalls import LostRuns, StallDetection
from sparkwatch.history import lost, migrate
from sparkwatch.history.schema import QueryRun, QueryStall
from tests.test_history_support import (
    batch_of,
    engine_for,
    fetch,
    load_sample,
    migrated_database,
    progress,
    started,
    write,
)

WEEK = 7 * 86_400.0


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from migrated_database(request)


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def a_run(url: str, start: datetime, batches: list[datetime],
          query_id: str | None = None) -> dict[str, str]:
    """A run started at ``start`` with a batch at each of ``batches``; returns its ids."""
    ids = {"id": query_id or str(uuid.uuid4()), "runId": str(uuid.uuid4())}
    sample = load_sample("stream_stream_join_rocksdb")
    write(url, started(ids["id"], ids["runId"], "orders", iso(start)),
          *[progress(batch_of(sample, n, iso(t), **ids)) for n, t in enumerate(batches)])
    return ids


def run_of(url: str, run_id: str) -> dict[str, Any]:
    [run] = fetch(url, "query_runs", run_id)
    return run


def open_marks(url: str, run_id: str) -> int:
    s = QueryStall.__table__.c
    with engine_for(url).connect() as conn:
        return conn.execute(sa.select(sa.func.count()).where(
            s.run_id == run_id, s.cleared_at.is_(None))).scalar_one()


def test_a_dead_drivers_run_stored_as_heard_years_ahead_is_stalled_then_lost(db_url: str) -> None:
    """An older writer stored a run's last event at the event's own time, years ahead (before
    ingest bounded it to a day): its driver died, no event came to bring the time back, and
    the run was neither stalled nor lost, "running" for good."""
    now = datetime.now(UTC)
    ids = a_run(db_url, now - timedelta(seconds=10),
                [now - timedelta(seconds=10 - i) for i in range(10)])
    r = QueryRun.__table__.c
    with engine_for(db_url).begin() as conn:
        conn.execute(sa.update(QueryRun).where(r.run_id == ids["runId"])
                     .values(last_event_at=now + timedelta(days=3000)))
    lost_runs = LostRuns(WEEK)
    detect = StallDetection(intervals=5, min_seconds=60, horizon_days=7)
    first_look = now + timedelta(hours=1)
    with engine_for(db_url).begin() as conn:
        lost_runs(conn, first_look)
    run = run_of(db_url, ids["runId"])
    assert (run["status"], run["last_event_at"]) == ("running", first_look)
    with engine_for(db_url).begin() as conn:
        detect(conn, first_look + timedelta(minutes=2))
    assert open_marks(db_url, ids["runId"]) == 1
    with engine_for(db_url).begin() as conn:
        lost_runs(conn, first_look + timedelta(days=7, minutes=1))
    run = run_of(db_url, ids["runId"])
    assert (run["status"], run["ended_at"]) == ("lost", first_look)


def test_a_run_heard_before_the_jobs_clock_keeps_its_last_event_time(db_url: str) -> None:
    now = datetime.now(UTC)
    ids = a_run(db_url, now - timedelta(seconds=10), [now - timedelta(seconds=5)])
    heard = run_of(db_url, ids["runId"])["last_event_at"]
    with engine_for(db_url).begin() as conn:
        LostRuns(WEEK)(conn, datetime.now(UTC) + timedelta(minutes=1))
    run = run_of(db_url, ids["runId"])
    assert (run["status"], run["last_event_at"]) == ("running", heard)


def test_a_silent_run_whose_start_was_stamped_ahead_ends_lost_no_earlier_than_it_started(
    db_url: str,
) -> None:
    """The start keeps the driver's time, 20 h ahead (ingest takes a day); the last event is
    kept no later than when the writer heard it. Ended lost at its last event, the run was 20 h
    long, negatively."""
    now = datetime.now(UTC)
    ahead = (now + timedelta(hours=20)).replace(microsecond=0)
    ids = a_run(db_url, ahead, [ahead])
    assert run_of(db_url, ids["runId"])["last_event_at"] < ahead
    with engine_for(db_url).begin() as conn:
        LostRuns(3600)(conn, now + timedelta(hours=2))
    run = run_of(db_url, ids["runId"])
    assert (run["status"], run["started_at"], run["ended_at"]) == ("lost", ahead, ahead)


def test_a_replaced_run_whose_start_was_stamped_ahead_ends_lost_no_earlier_than_it_started(
    db_url: str,
) -> None:
    now = datetime.now(UTC)
    ahead = (now + timedelta(hours=20)).replace(microsecond=0)
    first = a_run(db_url, ahead, [ahead])
    # Its driver dies; the query restarts on a driver whose clock is right.
    second = a_run(db_url, datetime.now(UTC) + timedelta(seconds=1), [], query_id=first["id"])
    run = run_of(db_url, first["runId"])
    assert (run["status"], run["started_at"], run["ended_at"]) == ("lost", ahead, ahead)
    assert run_of(db_url, second["runId"])["status"] == "running"


def test_an_abandoned_run_whose_start_was_stamped_ahead_ends_no_earlier_than_it_started(
    db_url: str,
) -> None:
    ahead = (datetime.now(UTC) + timedelta(hours=20)).replace(microsecond=0)
    ids = a_run(db_url, ahead, [ahead])
    with engine_for(db_url).begin() as conn:
        assert lost.end_abandoned(conn, [ids["runId"]]) == 1
    run = run_of(db_url, ids["runId"])
    assert (run["status"], run["started_at"], run["ended_at"]) == ("lost", ahead, ahead)


def test_the_trigger_interval_is_the_median_gap_of_a_runs_last_eleven_batches(db_url: str) -> None:
    """19 batches a minute apart, then 11 two seconds apart: the interval is 2 s (threshold 5 x 2
    s), not the minute the older batches would make it; a run of 3 batches takes all of them."""
    now = datetime.now(UTC).replace(microsecond=0)
    last = now - timedelta(seconds=30)
    recent = [last - timedelta(seconds=2 * i) for i in range(11)][::-1]
    older = [recent[0] - timedelta(minutes=19 - i) for i in range(19)]
    long_run = a_run(db_url, older[0], older + recent)
    short_run = a_run(db_url, last - timedelta(seconds=8), [last - timedelta(seconds=8 - 4 * i)
                                                            for i in range(3)])
    with engine_for(db_url).begin() as conn:
        StallDetection(intervals=5, min_seconds=1, horizon_days=7)(conn, now)
    s = QueryStall.__table__.c
    with engine_for(db_url).connect() as conn:
        thresholds = dict(conn.execute(sa.select(s.run_id, s.threshold_seconds).where(
            s.run_id.in_([long_run["runId"], short_run["runId"]]))).all())
    assert thresholds == {long_run["runId"]: 10.0, short_run["runId"]: 20.0}


def test_stall_detection_reads_only_the_recent_batches_of_a_run_with_very_many(
    pg_url: str,
) -> None:
    """A run of 20,000 batches (a 1-second trigger for five and a half hours; a week of it is
    604,800): every stall check ranked all of them to keep 11."""
    now = datetime.now(UTC)
    run_id = str(uuid.uuid4())
    migrate.upgrade(pg_url)
    engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO query_runs (run_id, tenant, query_id, app_name, app_id, "
                "spark_version, status, last_event_at, batches) VALUES (:r, 'default', :q, "
                "'orders-etl', 'app-1', '4.0.0', 'running', :last, 20000)"),
                {"r": run_id, "q": str(uuid.uuid4()), "last": now - timedelta(seconds=60)})
            conn.execute(sa.text(
                "INSERT INTO batches (run_id, batch_id, query_id, timestamp, batch_duration_ms, "
                "num_input_rows, duration_ms, observed_metrics) SELECT :r, g, 'q', "
                ":last - (20000 - g) * interval '1 second', 1, 1, '{}', '{}' "
                "FROM generate_series(1, 20000) g"),
                {"r": run_id, "last": now - timedelta(seconds=60)})
        with engine.begin() as conn:
            assert StallDetection(intervals=5, min_seconds=1, horizon_days=7)(conn, now) == (1, 0)
            # What this transaction read of the batches (every partition of them).
            read = conn.execute(sa.text(
                "SELECT sum(seq_tup_read + coalesce(idx_tup_fetch, 0)) "
                "FROM pg_stat_xact_user_tables WHERE relname LIKE 'batches%'")).scalar_one()
            threshold = conn.execute(sa.select(QueryStall.threshold_seconds).where(
                QueryStall.run_id == run_id)).scalar_one()
    finally:
        engine.dispose()
    assert threshold == 5.0
    assert read <= 200
