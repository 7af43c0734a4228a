"""Faults with real processes: the history database stopped (a private PostgreSQL cluster this
module starts and stops with pg_ctl; the shared server is left alone) and the collector killed
with SIGKILL while its spool holds events. Ingest and /metrics keep working, and every accepted
event reaches the history exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.history import migrate
from tests.support import wait_for
from tests.test_collector_support import (
    Collector,
    PrivatePostgres,
    count_rows,
    fresh_ids,
    run_events,
    running,
    samples,
    scalar,
)

pytestmark = pytest.mark.postgres


@pytest.fixture
def private_url(private_cluster: PrivatePostgres) -> Iterator[str]:
    """A database in the private cluster; the cluster is running again after the test."""
    with private_cluster.database() as url:
        yield url


def batches(url: str, run_id: str) -> int:
    return count_rows(url, "select count(*) from batches where run_id = :r", r=run_id)


def operator_rows(url: str, run_id: str) -> int:
    return int(scalar(url, "select count(*) from operator_batches where run_id = :r", r=run_id))


def expected(events: list[dict[str, Any]]) -> tuple[int, int]:
    progress = [e["payload"] for e in events if e["kind"] == "progress"]
    return len(progress), sum(len(p["stateOperators"]) for p in progress)


def in_metrics(collector: Collector, query_id: str) -> float | None:
    values = [v for labels, v in samples(collector.metrics(), "spark_streaming_query_batches_total")
              if labels["query_id"] == query_id]
    return values[0] if values else None


def test_database_down_ingest_continues_and_replays_without_loss(
    private_cluster: PrivatePostgres, private_url: str, tmp_path: Path
) -> None:
    collector = Collector(private_url, tmp_path / "spool")
    before, during = [fresh_ids() for _ in range(2)], [fresh_ids() for _ in range(3)]
    runs = {ids["run_id"]: run_events(**ids) for ids in before + during}
    with running(collector):
        for ids in before:
            assert collector.post(runs[ids["run_id"]]).status_code == 200
        wait_for(lambda: all(batches(private_url, i["run_id"]) == expected(runs[i["run_id"]])[0]
                             for i in before), 30, "the first runs in the history")

        private_cluster.stop()
        for ids in during:
            response = collector.post(runs[ids["run_id"]], gzipped=True)
            assert response.status_code == 200 and response.json()["rejected"] == []
        wait_for(lambda: collector.get("/readyz").json()["status"] == "degraded", 30,
                 "/readyz to report the history degraded")
        ready = collector.get("/readyz").json()
        # /readyz needs no token: it says what fails, never where the history lives.
        assert ready["history"] == {"enabled": True, "ok": False, "error": (
            "history writes fail (events stay spooled); the collector's log says why")}
        assert "history write to" in collector.log_text()  # the detail, for the operator
        assert ready["spool"]["pending_bytes"] > 0
        for ids in during:  # metrics keep being served while the database is down
            assert in_metrics(collector, ids["query_id"]) == expected(runs[ids["run_id"]])[0]

        private_cluster.start()
        for run_id, events in runs.items():
            n_batches, n_operators = expected(events)
            wait_for(lambda r=run_id, n=n_batches: batches(private_url, r) == n, 60,
                     f"run {run_id} replayed")
            assert operator_rows(private_url, run_id) == n_operators
        wait_for(lambda: collector.get("/readyz").json()["status"] == "ready", 30, "ready again")
        assert collector.get("/readyz").json()["spool"]["pending_bytes"] == 0


def test_sigkill_with_events_in_the_spool_replays_them_after_restart(
    private_cluster: PrivatePostgres, private_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(private_url)  # the schema exists before the database goes away
    collector = Collector(private_url, tmp_path / "spool")
    ids = fresh_ids()
    events = run_events(**ids)
    n_batches, n_operators = expected(events)
    collector.start()
    try:
        private_cluster.stop()  # keep the events in the spool
        assert collector.post(events).json()["accepted"] == len(events)
        assert collector.get("/readyz").json()["spool"]["pending_bytes"] > 0
        collector.kill()
        private_cluster.start()
        assert batches(private_url, ids["run_id"]) == 0, "nothing was written before the kill"

        collector.start()
        # The spool is folded back into /metrics at start, and replayed into the history.
        assert in_metrics(collector, ids["query_id"]) == n_batches
        wait_for(lambda: batches(private_url, ids["run_id"]) == n_batches, 60, "replay")
        assert operator_rows(private_url, ids["run_id"]) == n_operators
        # A client that never saw the answer sends again: nothing is counted twice.
        again = collector.post(events).json()
        assert again["duplicates"] == n_batches
        assert in_metrics(collector, ids["query_id"]) == n_batches
        wait_for(lambda: collector.get("/readyz").json()["spool"]["pending_bytes"] == 0, 30,
                 "the resent events written")
        assert batches(private_url, ids["run_id"]) == n_batches
    finally:
        collector.stop()


def test_a_history_that_is_no_database_is_a_warning_and_ingest_goes_on(tmp_path: Path) -> None:
    """Another file at the history's path (or a newer schema) never takes the schema: each
    attempt was logged at info, so nothing in a warnings-only log said the history was off."""
    history = tmp_path / "history.db"
    history.write_text("not a database\n")
    collector = Collector(f"sqlite:///{history}", tmp_path / "spool")
    with running(collector):
        wait_for(lambda: "schema upgrade failed (attempt 2)" in collector.log_text(), 30,
                 "two attempts at the schema")
        attempts = [line for line in collector.log_text().splitlines()
                    if "history schema upgrade failed" in line]
        assert " WARNING " in attempts[0] and "(attempt 1)" in attempts[0], attempts
        assert "file is not a database" in attempts[0]
        assert " INFO " in attempts[1], attempts
        assert collector.post(run_events(**fresh_ids())).status_code == 200
    assert history.read_text() == "not a database\n"
