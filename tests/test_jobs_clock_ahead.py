"""The leased jobs against times stored or taken ahead of the clock: an ended run an older writer
stored years ahead (retention must still delete it, in its time), and a replica whose clock
jumped years ahead (its job runs must not take the others' slots ahead of time, nor run with
that clock). On SQLite and PostgreSQL, through the collector's own job objects and runner."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from sparkwatch.collector.leases import Job, LeasedRunner
from sparkwatch.collector.retention import Retention
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.history.schema import TERMINATED, JobRun, QueryRun
from tests.test_collector_jobs import progress_at, write
from tests.test_collector_support import fresh_ids
from tests.test_history_support import engine_for, fetch, migrated_database
from tests.test_jobs_hostile import a_run

YEARS = timedelta(days=3 * 365)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> Iterator[str]:
    yield from migrated_database(request)


def ended_run_stamped(url: str, at: datetime) -> str:
    """A run without batches left, ended, whose times are all ``at`` (as an older writer stored
    an event's own time); returns its run id."""
    run_id = a_run(url, datetime.now(UTC), [])["runId"]
    r = QueryRun.__table__.c
    with engine_for(url).begin() as conn:
        conn.execute(sa.update(QueryRun).where(r.run_id == run_id).values(
            status=TERMINATED, started_at=at, ended_at=at, last_event_at=at))
    return run_id


def runs(url: str, run_id: str) -> list[dict[str, object]]:
    return fetch(url, "query_runs", run_id)


def retention(url: str, now: datetime) -> None:
    with engine_for(url).begin() as conn:
        Retention(raw_days=7, rollup_days=30)(conn, now)


def test_an_ended_run_stored_years_ahead_is_deleted_a_retention_after_the_job_first_saw_it(
    db_url: str,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    run_id = ended_run_stamped(db_url, now + YEARS)
    retention(db_url, now)
    [run] = runs(db_url, run_id)
    assert (run["last_event_at"], run["ended_at"]) == (now, now + YEARS)
    retention(db_url, now + timedelta(days=29))
    assert len(runs(db_url, run_id)) == 1
    retention(db_url, now + timedelta(days=30, minutes=1))
    assert runs(db_url, run_id) == []


def test_retention_leaves_a_run_a_replica_slightly_ahead_just_ended_as_it_stored_it(
    db_url: str,
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    ahead = now + timedelta(minutes=4)
    run_id = ended_run_stamped(db_url, ahead)
    retention(db_url, now)
    [run] = runs(db_url, run_id)
    assert (run["last_event_at"], run["ended_at"]) == (ahead, ahead)


def runner(url: str, replica: str, clock: datetime) -> LeasedRunner:
    return LeasedRunner(engine_for(url), replica, SelfMetrics(CollectorRegistry()),
                        clock=lambda: clock)


def claims(url: str, job: str) -> list[tuple[str, datetime]]:
    j = JobRun.__table__.c
    with engine_for(url).connect() as conn:
        rows = conn.execute(sa.select(j.replica, j.slot).where(j.job == job).order_by(j.slot))
        return [(replica, slot.replace(tzinfo=UTC)) for replica, slot in rows]


def test_a_replica_whose_clock_jumped_years_ahead_takes_no_slot_ahead_of_the_others(
    db_url: str,
) -> None:
    """Its claims were of slots years ahead: the others ran the job meanwhile, but once their
    clocks came to those slots every one was taken, and no replica ran the job for as long as
    the jumped one had run it. Now it runs the job at the database's time, in the others' slot."""
    job, seen = f"probe-{uuid.uuid4().hex[:8]}", []
    before = datetime.now(UTC)  # the database's clock: the same host's
    right = runner(db_url, "right", before)
    jumped = runner(db_url, "jumped", before + YEARS)
    probe = Job(job, 86_400, lambda conn, now: seen.append(now))
    assert jumped.run(probe)
    assert not right.run(probe)  # the same day's slot: run once
    [(replica, slot)] = claims(db_url, job)
    assert replica == "jumped" and slot <= before
    after = datetime.now(UTC)
    assert [before <= t <= after for t in seen] == [True]


def test_a_replica_whose_clock_jumped_ahead_deletes_no_batch_that_is_not_due(
    db_url: str,
) -> None:
    ids = fresh_ids()
    write(db_url, progress_at([datetime.now(UTC) - timedelta(minutes=1)], **ids))
    now = datetime.now(UTC)
    jumped = runner(db_url, f"jumped-{uuid.uuid4().hex[:8]}", now + YEARS)
    assert jumped.run(Job(f"retention-{uuid.uuid4().hex[:8]}", 60,
                          Retention(raw_days=7, rollup_days=30)))
    assert len(fetch(db_url, "batches", ids["run_id"])) == 1
    assert len(runs(db_url, ids["run_id"])) == 1


def test_a_replica_a_little_ahead_runs_its_jobs_on_its_own_clock(db_url: str) -> None:
    job, seen = f"probe-{uuid.uuid4().hex[:8]}", []
    ahead = datetime.now(UTC) + timedelta(minutes=4)
    assert runner(db_url, "ahead", ahead).run(Job(job, 60, lambda conn, now: seen.append(now)))
    assert seen == [ahead]


def test_retention_deletes_the_claims_a_jumped_clock_left_more_than_a_day_ahead(
    db_url: str,
) -> None:
    job, now = f"probe-{uuid.uuid4().hex[:8]}", datetime.now(UTC).replace(microsecond=0)
    slots = [now - timedelta(hours=1), now + timedelta(hours=20), now + YEARS]
    with engine_for(db_url).begin() as conn:
        conn.execute(sa.insert(JobRun), [
            {"job": job, "slot": slot, "replica": "r", "ran_at": slot} for slot in slots])
    retention(db_url, now)
    assert [slot for _, slot in claims(db_url, job)] == slots[:2]
