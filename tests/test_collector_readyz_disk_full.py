"""/readyz on a real full disk (a 2 MiB tmpfs under the spool, its byte bound far away): while
the last spool append failed, every push gets 503, so the collector says it is not ready (a load
balancer sends pushes elsewhere) and a gauge says why; one append that succeeds makes it ready
again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_collector_support import Collector, fresh_ids, run_events, samples
from tests.tmpfs import Filler, small_filesystem


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", "2m") as mounted:
        yield mounted


def writable(collector: Collector) -> list[float]:
    return [v for _, v in samples(collector.metrics(), "sparkwatch_collector_spool_writable")]


def test_readyz_is_not_ready_while_the_spool_disk_refuses_appends_and_recovers_after_one(
    disk: Path, tmp_path: Path
) -> None:
    collector = Collector(f"sqlite:///{tmp_path / 'history.db'}", disk / "spool")
    collector.log = tmp_path / "collector.log"  # not on the full disk
    filler = Filler(disk / "filler")
    collector.start()
    try:
        assert collector.post(run_events(**fresh_ids())).status_code == 200
        assert collector.get("/readyz").status_code == 200
        assert writable(collector) == [1.0]

        filler.fill(leave=0)
        assert collector.post(run_events(**fresh_ids())).status_code == 503
        ready = collector.get("/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["status"] == "spool_unwritable"
        assert ready.json()["spool"]["writable"] is False
        # Served without a token: the OS's words, not the spool's directory.
        assert ready.json()["spool"]["error"] == "the spool cannot write: No space left on device"
        assert writable(collector) == [0.0]

        filler.free()
        assert collector.post(run_events(**fresh_ids())).status_code == 200
        ready = collector.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready", ready.text
        assert ready.json()["spool"]["writable"] is True
        assert ready.json()["spool"]["error"] is None
        assert writable(collector) == [1.0]
    finally:
        collector.stop()
        filler.free()
