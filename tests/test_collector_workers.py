"""The collector's history pump reports its own health truthfully: idle it keeps beating; blocked
on a history writer process that never answers (SIGSTOPped) it stops beating, and /readyz and the
last-progress gauge show it hung within the deadline; once the writer runs again it recovers and
every event reaches the history."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from glob import glob
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_for
from tests.test_collector_support import (
    Collector,
    count_rows,
    fresh_ids,
    run_events,
    running,
    samples,
)

pytestmark = pytest.mark.postgres

DEADLINE = 2.0
GAUGE = "sparkwatch_collector_worker_last_progress_timestamp_seconds"


def writer_child(collector_pid: int) -> int:
    """The history writer process: the collector's child running the writer module."""
    children = [int(pid) for path in glob(f"/proc/{collector_pid}/task/*/children")
                for pid in Path(path).read_text().split()]
    writers = [pid for pid in children
               if b"history_process" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert len(writers) == 1, f"children {children}, writers {writers}"
    return writers[0]


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def history_worker(collector: Collector) -> dict[str, Any]:
    ready = collector.get("/readyz").json()
    (worker,) = [w for w in ready["workers"] if w["name"] == "history"]
    return {"status": ready["status"], **worker}


def progress_gauge(collector: Collector) -> float:
    [(labels, value)] = samples(collector.metrics(), GAUGE)
    assert labels == {"worker": "history"}
    return value


def batches(url: str, run_ids: list[str]) -> int:
    return count_rows(url, "select count(*) from batches where run_id = any(:r)", r=run_ids)


def progress_count(events: list[dict[str, Any]]) -> int:
    return sum(e["kind"] == "progress" for e in events)


def test_a_stopped_history_writer_shows_as_a_hung_worker_then_recovers(
    pg_url: str, tmp_path: Path
) -> None:
    collector = Collector(pg_url, tmp_path / "spool", "--worker-deadline-seconds", str(DEADLINE))
    first, second = fresh_ids(), fresh_ids()
    before, during = run_events(**first), run_events(**second)
    with running(collector):
        assert collector.post(before).status_code == 200
        wait_for(lambda: batches(pg_url, [first["run_id"]]) == progress_count(before), 30,
                 "the first run in the history")

        # Idle is not hung: with nothing to write the pump keeps beating.
        idle = progress_gauge(collector)
        wait_for(lambda: progress_gauge(collector) > idle + DEADLINE, 30, "beats while idle")
        assert history_worker(collector)["state"] == "ok"
        assert collector.get("/readyz").json()["status"] == "ready"

        assert collector.proc is not None
        with stopped(writer_child(collector.proc.pid)):
            assert collector.post(during).status_code == 200  # the pump now waits on the child
            wait_for(lambda: history_worker(collector)["state"] == "hung", DEADLINE + 10,
                     "/readyz to report the history worker hung")
            hung = history_worker(collector)
            assert hung["status"] == "degraded"
            assert hung["seconds_since_progress"] > DEADLINE == hung["deadline_seconds"]
            frozen = progress_gauge(collector)
            wait_for(lambda: history_worker(collector)["seconds_since_progress"]
                     > hung["seconds_since_progress"] + 1, 30, "time to pass")
            assert progress_gauge(collector) == frozen, "a blocked worker must not beat"
            assert collector.post(run_events(**fresh_ids())[:1]).status_code == 200, \
                "ingest goes on meanwhile"

        wait_for(lambda: collector.get("/readyz").json()["status"] == "ready", 30, "ready again")
        assert history_worker(collector)["state"] == "ok"
        assert progress_gauge(collector) > frozen
        wait_for(lambda: batches(pg_url, [second["run_id"]]) == progress_count(during), 30,
                 "events spooled while the writer was stopped are written")
