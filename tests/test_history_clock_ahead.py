"""A run's last event time, which stall and lost-run detection measure silence from, is never
later than when the writer stored it: one event stamped ahead (a driver's clock; ingest takes up
to a day) made its run look alive until the wall clock passed that time. Each batch keeps its own
time. Writer-level, on SQLite and PostgreSQL (the collector end to end:
tests/test_collector_clock_ahead.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from sparkwatch.collector.stalls import StallDetection
from sparkwatch.history import lost
from sparkwatch.history.schema import QueryRun
from tests.test_history_support import (
    batch_of,
    engine_for,
    fetch,
    idle,
    load_sample,
    progress,
    write,
)

AHEAD = timedelta(hours=23)


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def a_run_reporting(url: str, now: datetime, last_ahead: bool) -> dict[str, str]:
    """A run with a batch every second up to ``now``; its last one stamped :data:`AHEAD`
    of ``now`` when ``last_ahead``. Returns its ids."""
    ids = {"id": str(uuid.uuid4()), "runId": str(uuid.uuid4())}
    sample = load_sample("stream_stream_join_rocksdb")
    times = [now - timedelta(seconds=10 - i) for i in range(10)]
    if last_ahead:
        times[-1] = now + AHEAD
    write(url, *[progress(batch_of(sample, batch_id, iso(t), **ids))
                 for batch_id, t in enumerate(times)])
    return ids


def run_of(url: str, run_id: str) -> dict:
    [run] = fetch(url, "query_runs", run_id)
    return run


def test_an_event_stamped_ahead_is_heard_no_later_than_it_was_written(history_url: str) -> None:
    before = datetime.now(UTC)
    ids = a_run_reporting(history_url, before, last_ahead=True)
    after = datetime.now(UTC)
    assert before <= run_of(history_url, ids["runId"])["last_event_at"] <= after
    last_batch = fetch(history_url, "batches", ids["runId"])[-1]
    assert last_batch["timestamp"] == before.replace(microsecond=before.microsecond // 1000
                                                     * 1000) + AHEAD  # its own time, kept


def test_a_run_whose_last_event_was_stamped_ahead_is_stalled_then_lost_when_silent(
    history_url: str,
) -> None:
    now = datetime.now(UTC)
    skewed = a_run_reporting(history_url, now, last_ahead=True)
    steady = a_run_reporting(history_url, now, last_ahead=False)
    detect = StallDetection(intervals=2, min_seconds=3, horizon_days=7)
    later = datetime.now(UTC) + timedelta(seconds=30)
    with engine_for(history_url).begin() as conn:
        assert detect(conn, later) == (2, 0)
        lost.end_silent(conn, later, silent_seconds=20)
    for ids in (skewed, steady):
        assert run_of(history_url, ids["runId"])["status"] == "lost"


def test_a_run_stored_as_heard_ahead_is_brought_back_by_its_next_event(history_url: str) -> None:
    """As a writer before this rule (or a replica whose clock runs ahead) stored it: the time
    only grew, so later events, stamped right, could not bring it back."""
    now = datetime.now(UTC)
    ids = a_run_reporting(history_url, now, last_ahead=False)
    r = QueryRun.__table__.c
    with engine_for(history_url).begin() as conn:
        conn.execute(sa.update(QueryRun).where(r.run_id == ids["runId"])
                     .values(last_event_at=now + AHEAD))
    heard = datetime.now(UTC).replace(microsecond=0)
    write(history_url, idle(ids["id"], ids["runId"], iso(heard)))
    # No later than the write: the stored time is taken back to it, the new event's may be it.
    assert heard <= run_of(history_url, ids["runId"])["last_event_at"] <= datetime.now(UTC)


def test_an_event_from_the_past_moves_no_run_back(history_url: str) -> None:
    now = datetime.now(UTC)
    ids = a_run_reporting(history_url, now, last_ahead=False)
    latest = run_of(history_url, ids["runId"])["last_event_at"]
    write(history_url, idle(ids["id"], ids["runId"], iso(now - timedelta(minutes=5))))
    assert run_of(history_url, ids["runId"])["last_event_at"] == latest
