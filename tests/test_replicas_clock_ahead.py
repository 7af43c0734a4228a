"""Times a writer takes from a clock that jumped ahead, bounded by the database's clock as the
collector's leased jobs are (tests/test_jobs_clock_ahead.py): a replica's progress report, which
held the other replicas' stall detection back for as long as it was ahead once it died with a
backlog, and a driver's own rollup claims, which took slots years ahead from the collector and
every other driver. On SQLite (the host's clock) and PostgreSQL (its now())."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from sparkwatch.collector.stalls import StallDetection
from sparkwatch.history import replicas, rollups
from sparkwatch.history.clock import bounded_now
from sparkwatch.history.schema import JobRun, QueryStall, ReplicaProgress
from tests.test_collector_jobs import progress_at, write
from tests.test_collector_support import fresh_ids
from tests.test_history_support import engine_for, migrated_database

YEARS = timedelta(days=3 * 365)
GONE = timedelta(seconds=replicas.LIVE_SECONDS + 60)
"""Long enough after a report for its replica to be gone."""


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from migrated_database(request)


@pytest.fixture(autouse=True)
def no_reports(db_url: str) -> None:
    """Each test's replicas alone (the least ``written_until`` is of every live replica)."""
    with engine_for(db_url).begin() as conn:
        conn.execute(sa.delete(ReplicaProgress))


def name(role: str) -> str:
    return f"{role}-{uuid.uuid4().hex[:8]}"


def report(url: str, replica: str, written_until: datetime, clock: datetime) -> None:
    with engine_for(url).begin() as conn:
        replicas.report(conn, replica, written_until, clock)


def reported_at(url: str, replica: str) -> datetime:
    with engine_for(url).connect() as conn:
        at: datetime = conn.execute(sa.select(ReplicaProgress.reported_at).where(
            ReplicaProgress.replica == replica)).scalar_one()
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def waited_for(url: str, now: datetime, other_than: str) -> datetime | None:
    with engine_for(url).connect() as conn:
        return replicas.least_written_until(conn, now, other_than=other_than)


def test_a_replica_that_jumped_ahead_and_died_with_a_backlog_holds_stalls_back_no_longer(
    db_url: str,
) -> None:
    """Its report counts as made at the database's time: the others wait for its backlog while
    it may still be writing, and open the stall once it is gone, not years later."""
    ids = fresh_ids()
    before = datetime.now(UTC)
    write(db_url, progress_at([before - timedelta(seconds=78 - 2 * i) for i in range(10)],
                              **ids))
    right = name("right")
    report(db_url, name("jumped"), before - timedelta(seconds=65), before + YEARS)
    assert waited_for(db_url, before, right) == before - timedelta(seconds=65)
    later = before + GONE
    assert waited_for(db_url, later, right) is None
    detect = StallDetection(intervals=5, min_seconds=5, horizon_days=7,
                            written_until=lambda: later, replica=right)
    with engine_for(db_url).begin() as conn:
        detect(conn, later)
    with engine_for(db_url).connect() as conn:
        marks = conn.execute(sa.select(QueryStall.run_id).where(
            QueryStall.run_id == ids["run_id"])).scalars().all()
    assert marks == [ids["run_id"]]


def test_a_report_stores_the_replicas_clock_within_the_slack_and_the_databases_beyond(
    db_url: str,
) -> None:
    before = datetime.now(UTC)
    ahead, jumped = name("ahead"), name("jumped")
    report(db_url, ahead, before, before + timedelta(minutes=4))
    report(db_url, jumped, before, before + YEARS)
    after = datetime.now(UTC)
    assert reported_at(db_url, ahead) == before + timedelta(minutes=4)
    assert before <= reported_at(db_url, jumped) <= after


def test_a_report_stored_years_ahead_by_an_older_replica_ages_from_the_next_report(
    db_url: str,
) -> None:
    """An older replica stored its own clock: the next report of any replica brings it back to
    the database's time, from which it ages as a report made then."""
    old, right, before = name("old"), name("right"), datetime.now(UTC)
    with engine_for(db_url).begin() as conn:
        conn.execute(sa.insert(ReplicaProgress).values(
            replica=old, written_until=before - timedelta(seconds=65),
            reported_at=before + YEARS))
    report(db_url, right, before, before)
    after = datetime.now(UTC)
    assert before <= reported_at(db_url, old) <= after
    assert waited_for(db_url, after + GONE, right) is None


def rollup_claims(url: str, replicas_: set[str]) -> dict[str, datetime]:
    j = JobRun.__table__.c
    with engine_for(url).connect() as conn:
        rows = conn.execute(sa.select(j.replica, j.slot).where(
            j.job == rollups.JOB, j.replica.in_(replicas_)))
        return {replica: slot.replace(tzinfo=UTC) for replica, slot in rows}


def roll_up(url: str, clock: datetime, replica: str) -> bool:
    """A driver's rollup tick at ``clock``, bounded as the writer's ``roll_up`` bounds it."""
    with engine_for(url).begin() as conn:
        return rollups.recompute_once_per_slot(conn, bounded_now(conn, clock), 86_400, replica)


def test_a_driver_whose_clock_jumped_ahead_rolls_up_in_the_others_slot_and_keeps_theirs(
    db_url: str,
) -> None:
    """Its claim was of a day years ahead (every writer found it taken when their clocks came to
    it), and its clean-up of claims older than a day before that deleted everyone's."""
    jumped, right, collector = name("jumped"), name("right"), name("collector")
    before = datetime.now(UTC).replace(microsecond=0)
    yesterday = before - timedelta(hours=20)
    with engine_for(db_url).begin() as conn:
        conn.execute(sa.insert(JobRun).values(job=rollups.JOB, slot=yesterday,
                                              replica=collector, ran_at=yesterday))
    assert roll_up(db_url, before + YEARS, jumped)
    assert not roll_up(db_url, before, right)  # the same day's slot: rolled up once
    claims = rollup_claims(db_url, {jumped, right, collector})
    assert sorted(claims) == sorted([collector, jumped])
    assert claims[collector] == yesterday and claims[jumped] <= before
