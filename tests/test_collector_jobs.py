"""The collector's scheduled jobs on real databases: retention deletes only what is due, rollups
equal the raw aggregates, stall detection fires and clears (also as a gauge on a running
collector), and two collectors on one database run each job once per slot."""

from __future__ import annotations

import copy
from collections import defaultdict
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.retention import Retention
from sparkwatch.collector.rollups import Rollups
from sparkwatch.collector.stalls import StallDetection
from sparkwatch.history import migrate, replicas
from sparkwatch.history.schema import JobRun, OperatorRollup, QueryRollup, QueryStall
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import AppInfo, Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from tests.support import wait_for
from tests.test_collector_support import (
    Collector,
    envelope,
    fresh_ids,
    recorded,
    running,
    samples,
    scalar,
)

NOW = datetime(2026, 11, 21, 12, 0, 30, tzinfo=UTC)
APP = AppInfo("jobs-app", "app-jobs-1", "4.3.0")


def iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def progress_at(times: list[datetime], query_id: str, run_id: str) -> list[dict[str, Any]]:
    """Recorded progress payloads (cycled) re-stamped at ``times`` as batches 0, 1, ..."""
    source = recorded()["progress"]
    out = []
    for batch_id, t in enumerate(times):
        p = copy.deepcopy(source[batch_id % len(source)])
        p.update(id=query_id, runId=run_id, batchId=batch_id, timestamp=iso(t))
        out.append(p)
    return out


def write(url: str, payloads: list[dict[str, Any]], kind: EventKind = EventKind.PROGRESS) -> None:
    writer = HistoryWriter(url)
    writer.write([parse_envelope(Envelope(kind, APP, NOW.timestamp(), p)) for p in payloads])
    writer.close()


def run_job(url: str, work: Any, now: datetime = NOW) -> Any:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            return work(conn, now)
    finally:
        engine.dispose()


def count(url: str, table: str) -> int:
    return int(scalar(url, f"select count(*) from {table}"))


def test_retention_deletes_only_what_is_due(history_url: str) -> None:
    ids = fresh_ids()
    ages = [10, 8, 7.01, 6.99, 1]  # days; raw rows are kept 7 days
    write(history_url, progress_at([NOW - timedelta(days=d) for d in ages], **ids))
    ops_per_batch = len(recorded()["progress"][0]["stateOperators"])
    old_slot, new_slot = NOW - timedelta(days=2), NOW - timedelta(hours=1)
    engine = sa.create_engine(history_url)
    with engine.begin() as conn:
        conn.execute(sa.insert(JobRun), [
            {"job": "x", "slot": slot, "replica": "r", "ran_at": slot}
            for slot in (old_slot, new_slot)])
    engine.dispose()
    deleted = run_job(history_url, Retention(raw_days=7, rollup_days=90))
    assert deleted["batches"] == 3
    assert deleted["operator_batches"] == 3 * ops_per_batch
    assert count(history_url, "batches") == 2
    assert count(history_url, "operator_batches") == 2 * ops_per_batch
    assert count(history_url, "source_batches") == 2
    assert count(history_url, "query_runs") == 1, "the run still has batches"
    assert int(scalar(history_url, "select batches from query_runs")) == 2, "its count follows"
    assert deleted["job_runs"] == 1 and count(history_url, "job_runs") == 1
    assert run_job(history_url, Retention(raw_days=7, rollup_days=90))["batches"] == 0


def expected_rollups(payloads: list[dict[str, Any]], seconds: int) -> tuple[dict, dict]:
    """The aggregates computed independently, in Python, from the progress JSON."""
    queries: dict[Any, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    operators: dict[Any, dict[str, Any]] = defaultdict(lambda: defaultdict(int))
    for p in payloads:
        epoch = int(datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp())
        bucket = datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)
        duration = p.get("batchDuration", p["durationMs"].get("triggerExecution", 0))
        q = queries[(p["id"], bucket)]
        q["batches"] += 1
        q["num_input_rows"] += p["numInputRows"]
        q["batch_duration_ms_sum"] += duration
        q["batch_duration_ms_max"] = max(q["batch_duration_ms_max"], duration)
        for index, op in enumerate(p["stateOperators"]):
            o = operators[(p["id"], index, bucket)]
            o["batches"] += 1
            o["rows"] = [*o.get("rows", []), op["numRowsTotal"]]
            o["num_rows_updated"] += op["numRowsUpdated"]
            o["num_rows_dropped_by_watermark"] += op["numRowsDroppedByWatermark"]
            o["memory_used_bytes_max"] = max(o["memory_used_bytes_max"], op["memoryUsedBytes"])
            o["commit_time_ms"] += op["commitTimeMs"]
    return queries, operators


def test_rollups_equal_the_raw_aggregates(history_url: str) -> None:
    start = NOW - timedelta(minutes=3)
    payloads = []
    for run in range(2):  # two queries, batches every 13 s across four minutes
        ids = fresh_ids()
        times = [start + timedelta(seconds=13 * i + run) for i in range(15)]
        payloads += progress_at(times, **ids)
    write(history_url, payloads)
    run_job(history_url, Rollups(lookback_seconds=3600))
    run_job(history_url, Rollups(lookback_seconds=3600))  # idempotent: upserts, no doubling
    engine = sa.create_engine(history_url)
    with engine.connect() as conn:
        for resolution, seconds in (("minute", 60), ("hour", 3600)):
            queries, operators = expected_rollups(payloads, seconds)
            got = {(r.query_id, r.bucket_start): r for r in conn.execute(
                sa.select(QueryRollup.__table__).where(QueryRollup.resolution == resolution))}
            assert len(got) == len(queries)
            for (qid, bucket), want in queries.items():
                row = got[(qid, bucket)]
                assert {k: getattr(row, k) for k in want} == want
            ops = {(r.query_id, r.operator_index, r.bucket_start): r for r in conn.execute(
                sa.select(OperatorRollup.__table__).where(
                    OperatorRollup.resolution == resolution))}
            assert len(ops) == len(operators)
            for (qid, index, bucket), want in operators.items():
                row = ops[(qid, index, bucket)]
                assert row.batches == want["batches"]
                assert row.num_rows_total_max == max(want["rows"])
                mean = sum(want["rows"]) / len(want["rows"])
                assert row.num_rows_total_avg == pytest.approx(mean)
                for key in ("num_rows_updated", "num_rows_dropped_by_watermark",
                            "memory_used_bytes_max", "commit_time_ms"):
                    assert getattr(row, key) == want[key], key
    engine.dispose()


def test_stall_detection_fires_for_a_silent_run_and_clears_when_it_resumes(
    history_url: str,
) -> None:
    silent, steady = fresh_ids(), fresh_ids()
    # Both ran a batch every 2 s; the first stopped 60 s ago, the second reported just now.
    write(history_url, progress_at([NOW - timedelta(seconds=80 - 2 * i) for i in range(10)],
                                   **silent))
    write(history_url, progress_at([NOW - timedelta(seconds=18 - 2 * i) for i in range(10)],
                                   **steady))
    detect = StallDetection(intervals=5, min_seconds=5, horizon_days=7)
    assert detect.threshold(2.0) == 10.0
    assert run_job(history_url, detect) == (1, 0)
    assert run_job(history_url, detect) == (0, 0), "an open mark is not opened again"
    stalls = scalar(history_url, "select count(*) from query_stalls where run_id = :r "
                    "and cleared_at is null", r=silent["run_id"])
    assert stalls == 1
    # It reports again (an idle event counts as much as progress): the mark clears.
    write(history_url, [{"id": silent["query_id"], "runId": silent["run_id"],
                         "timestamp": iso(NOW)}], EventKind.IDLE)
    assert run_job(history_url, detect, NOW + timedelta(seconds=1)) == (0, 1)
    assert count(history_url, "query_stalls") == 1
    # Ended runs are never stalled.
    write(history_url, [{"id": steady["query_id"], "runId": steady["run_id"],
                         "exception": None}], EventKind.TERMINATED)
    assert run_job(history_url, detect, NOW + timedelta(minutes=10)) == (1, 0)


def test_stall_detection_judges_silence_only_up_to_what_the_history_holds(
    history_url: str,
) -> None:
    ids = fresh_ids()
    # Its last batch is 60 s old in the history, but the spool still holds what came since: the
    # history is complete only up to 65 s ago (the start of an outage it still drains).
    write(history_url, progress_at([NOW - timedelta(seconds=78 - 2 * i) for i in range(10)],
                                   **ids))
    behind = StallDetection(intervals=5, min_seconds=5, horizon_days=7,
                            written_until=lambda: NOW - timedelta(seconds=65))
    assert run_job(history_url, behind) == (0, 0)
    caught_up = StallDetection(intervals=5, min_seconds=5, horizon_days=7,
                               written_until=lambda: NOW + timedelta(hours=1))  # never past now
    assert run_job(history_url, caught_up) == (1, 0)


def test_stall_detection_waits_for_the_history_of_every_live_replica(history_url: str) -> None:
    """Another replica still writing what it acknowledged 65 s ago holds the job back as this
    replica's own spool would; one that stopped reporting 5 minutes ago, or stopped drained,
    does not."""
    ids = fresh_ids()
    write(history_url, progress_at([NOW - timedelta(seconds=78 - 2 * i) for i in range(10)],
                                   **ids))
    detect = StallDetection(intervals=5, min_seconds=5, horizon_days=7,
                            written_until=lambda: NOW)

    def reported(replica: str, written_until: datetime, at: datetime) -> None:
        run_job(history_url, lambda conn, _: replicas.report(conn, replica, written_until, at))

    reported("b", NOW - timedelta(seconds=65), NOW - timedelta(seconds=3))
    assert run_job(history_url, detect) == (0, 0)
    reported("b", NOW - timedelta(seconds=65), NOW - timedelta(seconds=replicas.LIVE_SECONDS + 1))
    reported("c", NOW - timedelta(seconds=70), NOW - timedelta(seconds=1))
    assert run_job(history_url, replicas.least_written_until) == NOW - timedelta(seconds=70)
    mine = StallDetection(intervals=5, min_seconds=5, horizon_days=7,
                          written_until=lambda: NOW, replica="c")  # its own report is older
    assert run_job(history_url, mine) == (1, 0)
    run_job(history_url, lambda conn, _: conn.execute(sa.delete(QueryStall)))
    run_job(history_url, lambda conn, _: replicas.forget(conn, "c"))
    assert run_job(history_url, replicas.least_written_until) is None
    assert run_job(history_url, detect) == (1, 0)


JUDGE_FLAGS = ("--stall-check-seconds", "1", "--stall-min-seconds", "5")
"""A threshold of 5 s, above the gap a loaded machine may leave between the last report written
and the first one held up (which the history rightly sees as silence), below the 8 s held up."""


@pytest.mark.postgres
@pytest.mark.parametrize("replicas", [1, 2], ids=["its-own-spool", "another-replicas-spool"])
def test_a_history_catching_up_after_an_outage_marks_no_live_query_stalled(
    pg_url: str, tmp_path: Path, replicas: int
) -> None:
    """The writer of the replica taking the query's events is held up (batches locked against
    inserts; reads and the jobs' own writes go on) while the query keeps reporting: before, the
    stall job judged silence by the lagging history and marked it stalled within seconds. With
    two replicas, ``a`` takes the events and runs no job, ``b`` runs the stall job and holds no
    backlog of its own: ``a``'s reports in ``replica_progress`` hold it back."""
    migrate.upgrade(pg_url)
    if replicas == 1:
        taker = judge = Collector(pg_url, tmp_path / "spool", *JUDGE_FLAGS)
    else:
        taker = Collector(pg_url, tmp_path / "a", "--no-jobs-enabled", "--replica", "a")
        judge = Collector(pg_url, tmp_path / "b", *JUDGE_FLAGS, "--replica", "b")
    ids = fresh_ids()
    batches = iter(range(10_000))

    def report() -> None:
        [payload] = progress_at([datetime.now(UTC)], **ids)
        payload["batchId"] = next(batches)
        assert taker.post([envelope("progress", payload)]).json()["accepted"] == 1

    def stall_runs() -> float:
        return job_counts(judge.metrics(), "ran").get("stalls", 0.0)

    def written() -> int:
        return int(scalar(pg_url, "select count(*) from batches where run_id = :r",
                          r=ids["run_id"]))

    with running(taker), (running(judge) if judge is not taker else nullcontext()):
        for _ in range(3):
            report()
        wait_for(lambda: written() == 3, 30, "the first batches in the history")
        engine = sa.create_engine(pg_url)
        try:
            with engine.begin() as lock:
                lock.execute(sa.text("LOCK TABLE batches IN EXCLUSIVE MODE"))
                # A report before each of 8 runs of the job (every 1 s; threshold 5 s).
                for _ in range(8):
                    runs = stall_runs()
                    report()
                    wait_for(lambda r=runs: stall_runs() > r, 30, "the stall job's next run")
                assert written() == 3  # the history really was held up
                assert int(scalar(pg_url, "select count(*) from query_stalls")) == 0
        finally:
            engine.dispose()
        reported = next(batches)
        wait_for(lambda: written() == reported, 30, "the held-up batches written")
    assert int(scalar(pg_url, "select count(*) from query_stalls")) == 0
    assert int(scalar(pg_url, "select count(*) from replica_progress")) == 0  # stopped drained


@pytest.mark.postgres
def test_the_stalled_gauge_on_a_running_collector(pg_url: str, tmp_path: Path) -> None:
    collector = Collector(pg_url, tmp_path / "spool", "--stall-check-seconds", "1",
                          "--stall-min-seconds", "2")
    ids = fresh_ids()
    now = datetime.now(UTC)
    events = [envelope("progress", p) for p in
              progress_at([now - timedelta(seconds=3 - 0.5 * i) for i in range(6)], **ids)]

    def stalled() -> float | None:
        values = [v for labels, v in samples(collector.metrics(),
                                              "spark_streaming_query_stalled")
                  if labels["query_id"] == ids["query_id"]]
        return values[0] if values else None

    with running(collector):
        assert collector.post(events).json()["accepted"] == len(events)
        wait_for(lambda: stalled() == 1, 30, "the query to be marked stalled")
        resumed = progress_at([datetime.now(UTC)] * 7, **ids)[-1]  # batch 6, stamped now
        assert collector.post([envelope("progress", resumed)]).json()["accepted"] == 1
        wait_for(lambda: stalled() == 0, 30, "the stall to clear")
    assert int(scalar(pg_url, "select count(*) from query_stalls where cleared_at is not null")) \
        == 1


def job_counts(text: str, outcome: str) -> dict[str, float]:
    return {labels["job"]: v for labels, v in samples(text, "sparkwatch_collector_job_runs_total")
            if labels["outcome"] == outcome}


@pytest.mark.postgres
def test_a_collector_on_an_empty_database_runs_every_job_after_its_migration_and_none_fails(
    pg_url: str, tmp_path: Path
) -> None:
    """The jobs used to be scheduled a second after start, racing the schema upgrade: on an
    empty database each failed once on missing tables ("job retention failed")."""
    collector = Collector(pg_url, tmp_path / "spool", "--rollup-interval-seconds", "1",
                          "--stall-check-seconds", "1", "--retention-interval-seconds", "1")
    jobs = {"retention", "rollups", "stalls", "lost-runs"}
    with running(collector):
        wait_for(lambda: set(job_counts(collector.metrics(), "ran")) >= jobs, 60,
                 "every leased job to run once")
        failed = job_counts(collector.metrics(), "failed")
    assert failed == {}
    assert " failed (will run again next interval)" not in collector.log_text()


@pytest.mark.postgres
def test_two_collectors_on_one_database_run_each_job_once_per_slot(
    pg_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(pg_url)
    fast = ("--rollup-interval-seconds", "1", "--stall-check-seconds", "1",
            "--retention-interval-seconds", "1")
    a = Collector(pg_url, tmp_path / "a", *fast, "--replica", "a")
    b = Collector(pg_url, tmp_path / "b", *fast, "--replica", "b")
    def slots() -> int:
        return int(scalar(pg_url, "select count(*) from job_runs where job = 'rollups'"))

    a.launch()
    b.launch()
    try:
        a.wait_healthy()
        b.wait_healthy()
        both_up = slots()
        wait_for(lambda: slots() >= both_up + 4, 30, "four rollup slots with both replicas up")
        texts = [a.metrics(), b.metrics()]
    finally:
        a.stop()
        b.stop()
    ran = [job_counts(t, "ran") for t in texts]
    skipped = [job_counts(t, "skipped") for t in texts]
    assert [job_counts(t, "failed") for t in texts] == [{}, {}]
    for job in ("rollups", "stalls", "retention"):
        rows = int(scalar(pg_url, "select count(*) from job_runs where job = :j", j=job))
        slots = int(scalar(pg_url, "select count(distinct slot) from job_runs where job = :j",
                           j=job))
        assert rows == slots, f"{job}: a slot ran twice"
        # Each run counted by a replica claimed a slot of its own (the count was scraped before
        # the replicas stopped, so later runs may add rows but never a second run of a slot).
        assert sum(r.get(job, 0) for r in ran) <= rows
        assert all(r.get(job, 0) + s.get(job, 0) > 0 for r, s in zip(ran, skipped, strict=True)), \
            f"{job}: both replicas take part: {ran} {skipped}"
    assert sum(s.get("rollups", 0) for s in skipped) > 0, "the replicas never contended"
    replicas = {row[0] for row in _rows(pg_url, "select distinct replica from job_runs")}
    assert replicas <= {"a", "b"}


def _rows(url: str, sql: str) -> list[Any]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        result = list(conn.execute(sa.text(sql)))
    engine.dispose()
    return result
