"""The fault suite: 20,000 real-shaped progress events through a real collector, its history
writer process and a private PostgreSQL cluster, under each fault in turn, with a poison event
(one the database refuses) in the middle of each run. Afterwards: every acknowledged event is
in the history exactly once, the poison alone is quarantined, the counters in /metrics are
exact, and the collector recovered without a restart (but for the SIGKILL, which is one)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from bench.fleet import Fleet
from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from tests.conftest import UNMEASURED
from tests.support import wait_for
from tests.test_collector_support import (
    Collector,
    PrivatePostgres,
    count_rows,
    samples,
)
from tests.tmpfs import Filler, small_filesystem

pytestmark = [pytest.mark.postgres, UNMEASURED]

EVENTS = int(os.environ.get("SPARKWATCH_FAULT_EVENTS", "20000"))
BATCH = 500
FAULT_SECONDS = 60.0
"""The longest a fault may take to show (the collector reporting it, or ingest refusing); each
fault is ended as soon as it showed, not after a fixed time."""
REFUSALS = 5
"""Requests a full disk refuses before space returns: the client's resending meets it again."""
# The fleet's events are dated 2026-11-01: the retention job would delete them as they land.
FLAGS = ("--no-jobs-enabled",)
REFUSE = "ALTER TABLE query_runs ADD CONSTRAINT no_poison CHECK (name IS DISTINCT FROM 'poison')"


@pytest.fixture
def history(private_cluster: PrivatePostgres) -> Iterator[str]:
    with private_cluster.database() as url:
        migrate.upgrade(url)
        _execute(url, REFUSE)
        yield url


def _execute(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(sql))
    engine.dispose()


@dataclass
class Load:
    """The fleet's events with one poison event in the middle, pushed in requests of BATCH."""

    app: str
    events: list[dict[str, Any]] = field(init=False)
    poison: dict[str, Any] = field(init=False)
    acked: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        fleet = Fleet(100, provider="hdfs", app=self.app)
        self.events = list(fleet.events(0, EVENTS))
        self.poison = next(Fleet(1, provider="hdfs", app=self.app + "-poison").events(0, 1))
        self.poison["payload"]["name"] = "poison"
        self.events.insert(EVENTS // 2, self.poison)

    def requests(self) -> Iterator[list[dict[str, Any]]]:
        for start in range(0, len(self.events), BATCH):
            yield self.events[start:start + BATCH]

    @property
    def run_ids(self) -> list[str]:
        return sorted({e["payload"]["runId"] for e in self.acked if e is not self.poison})


def push(collector: Collector, load: Load, during: Callable[[int], None]) -> None:
    """Every request until acknowledged (as the push sink does: a refused or unanswered request
    is sent again); ``during(i)`` runs before request ``i`` (faults start and end there)."""
    for i, request in enumerate(load.requests()):
        during(i)
        deadline = time.monotonic() + 180
        while True:
            try:
                response = collector.post(request, gzipped=True)
            except httpx.HTTPError:
                response = None
            if response is not None and response.status_code == 200:
                assert response.json()["rejected"] == []
                load.acked.extend(request)
                break
            assert response is None or response.status_code == 503, response.text
            assert time.monotonic() < deadline, "a request was never acknowledged"
            collector_wait(collector)


def collector_wait(collector: Collector) -> None:
    """Between retries: until the collector answers its health check (or briefly)."""
    with contextlib.suppress(AssertionError):
        wait_for(lambda: _healthy(collector), 2, "collector health")


def _healthy(collector: Collector) -> bool:
    try:
        return httpx.get(collector.url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def hold(collector: Collector, shows: Callable[[dict[str, Any]], bool], what: str) -> None:
    """Keep a fault on until the collector's /readyz ``shows`` it (at most FAULT_SECONDS)."""
    wait_for(lambda: shows(_ready(collector)), FAULT_SECONDS, what)


def _ready(collector: Collector) -> dict[str, Any]:
    try:
        return dict(httpx.get(collector.url + "/readyz", timeout=1).json())
    except httpx.HTTPError:
        return {}


def _degraded(ready: dict[str, Any]) -> bool:
    return ready.get("status") == "degraded"


def _writer_hung(ready: dict[str, Any]) -> bool:
    return _degraded(ready) and any(w.get("state") == "hung" for w in ready.get("workers", []))


def check(collector: Collector, url: str, load: Load, spool: Path,
          counters_exact: bool = True) -> None:
    progress = [e for e in load.acked if e is not load.poison]
    try:
        wait_for(lambda: _stored(url, load) == len(progress), 180, "acknowledged events stored")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {_stored(url, load)} of {len(progress)} "
                             f"(log {collector.log})") from None
    total, distinct = _counts(url, load)
    assert total == distinct == len(progress), "duplicates in the history"
    [entry] = Quarantine(spool).entries()
    assert entry.event["payload"]["name"] == "poison" and "no_poison" in entry.reason
    if counters_exact:
        text = collector.metrics()
        batches = sum(v for labels, v in samples(text, "spark_streaming_query_batches_total")
                      if labels["app_name"] == load.app)
        assert batches == len(progress)


def _stored(url: str, load: Load) -> int:
    return count_rows(url, "select count(*) from batches where run_id = any(:r)", r=load.run_ids)


def _counts(url: str, load: Load) -> tuple[int, int]:
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        row = conn.execute(sa.text(
            "select count(*), count(distinct (run_id, batch_id)) from batches "
            "where run_id = any(:r)"), {"r": load.run_ids}).one()
    engine.dispose()
    return int(row[0]), int(row[1])


def writer_pid(collector: Collector) -> int:
    assert collector.proc is not None
    pid = collector.proc.pid
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += (task / "children").read_text().split()
    [child] = children
    return int(child)


def test_collector_sigkill(history: str, tmp_path: Path) -> None:
    spool, load = tmp_path / "spool", Load("fault-sigkill")
    collector = Collector(history, spool, *FLAGS)
    collector.start()

    def during(i: int) -> None:
        if i == 15:
            collector.kill()  # events accepted and not yet written stay in the spool
            collector.start()

    try:
        push(collector, load, during)
        check(collector, history, load, spool, counters_exact=False)
    finally:
        collector.stop()


def test_database_stopped(private_cluster: PrivatePostgres, history: str, tmp_path: Path) -> None:
    spool, load = tmp_path / "spool", Load("fault-db")
    collector = Collector(history, spool, *FLAGS)

    def during(i: int) -> None:
        if i == 10:
            private_cluster.stop()
        if i == 20:
            hold(collector, _degraded, "the stopped database reported")
            assert collector.get("/readyz").json()["status"] == "degraded"
            private_cluster.start()

    collector.start()
    try:
        push(collector, load, during)
        check(collector, history, load, spool)
    finally:
        collector.stop()


def test_history_writer_stopped(history: str, tmp_path: Path) -> None:
    spool, load = tmp_path / "spool", Load("fault-sigstop")
    collector = Collector(history, spool, *FLAGS, "--write-batch-size", "500",
                          "--worker-deadline-seconds", "5")
    stopped: list[int] = []

    def during(i: int) -> None:
        if i == 10:
            wait_for(lambda: _stored(history, load) > 0, 60, "the writer at work")
            stopped.append(writer_pid(collector))
            os.kill(stopped[0], signal.SIGSTOP)
        if i == 20:
            hold(collector, _writer_hung, "the stopped writer reported hung")
            ready = collector.get("/readyz").json()  # the hung writer shows, named
            assert ready["status"] == "degraded", ready
            assert {"name": "history", "state": "hung"}.items() <= ready["workers"][0].items()
            os.kill(stopped[0], signal.SIGCONT)
            wait_for(lambda: collector.get("/readyz").json()["status"] == "ready", 60,
                     "ready again once the writer runs")

    collector.start()
    try:
        push(collector, load, during)
        check(collector, history, load, spool)
    finally:
        if stopped:
            os.kill(stopped[0], signal.SIGCONT)
        collector.stop()


def test_spool_disk_full_and_freed(history: str, tmp_path: Path) -> None:
    load = Load("fault-disk")
    with small_filesystem(tmp_path / "disk", "48m") as disk:
        spool, filler = disk / "spool", Filler(disk / "filler")
        collector = Collector(history, spool, *FLAGS)
        refused: list[int] = []

        def space_returns() -> None:
            try:  # freed even if ingest never refuses: the assertion below then says so
                wait_for(lambda: _refused(collector) >= REFUSALS, FAULT_SECONDS,
                         f"ingest refusing {REFUSALS} requests")
            finally:
                try:
                    refused.append(_refused(collector))
                finally:
                    filler.free()

        # The disk stays full until ingest has answered 503 to REFUSALS requests (the pushing
        # client, as the push sink does, keeps the events and sends them again), then space
        # returns.
        returns = threading.Thread(target=space_returns, daemon=True)

        def during(i: int) -> None:
            if i == 10:
                filler.fill(leave=1 << 20)
                returns.start()

        collector.start()
        try:
            push(collector, load, during)
            check(collector, history, load, spool)
            assert refused and refused[0] > 0, "the full disk refused nothing"
        finally:
            if returns.is_alive():
                returns.join(FAULT_SECONDS + 10)
            collector.stop()


def _refused(collector: Collector) -> int:
    text = collector.metrics()
    return int(sum(v for labels, v in samples(text, "sparkwatch_collector_ingest_requests_total")
                   if labels["code"] == "503"))

