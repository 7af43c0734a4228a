"""The quarantine on a full disk (the spool's, a real tmpfs filled by a filler file; the history's
disk is fine): the attempt fails naming the quarantine file and the disk's error, not the history,
nothing is logged as quarantined until it is, and once there is room the same events are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.collector.history_process import WriteFailed, WriterProcess, Written
from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.spool import Spool
from tests.test_collector_support import fresh_ids, run_events
from tests.tmpfs import Filler, small_filesystem


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", "2m") as mounted:
        yield mounted


def test_a_quarantine_the_disk_refuses_fails_the_attempt_naming_it_and_logs_nothing_quarantined(
    disk: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'history.db'}"  # not on the full disk
    spool = Spool(disk / "spool", 1 << 26, fsync=False)
    ids = fresh_ids()
    events = run_events(terminated=False, **ids)
    writer = WriterProcess(url, migrate=True, spool_dir=spool.directory)
    filler = Filler(disk / "filler")
    try:
        spool.append({"tenant": "ta", "events": events[:3]})
        written = writer.write(spool.cursor, spool.end, 1000, lambda: False)
        assert written is not None
        spool.commit(written.position)
        # Another tenant's events naming ta's run: the history leaves them out, for the quarantine.
        spool.append({"tenant": "tb", "events": events[3:]})
        capfd.readouterr()
        filler.fill(leave=0)
        with pytest.raises(WriteFailed) as failed:
            writer.write(spool.cursor, spool.end, 1000, lambda: False)
        quarantine = Quarantine(spool.directory)
        assert str(quarantine.path) in str(failed.value)
        assert "No space left on device" in str(failed.value)
        assert "quarantined" not in capfd.readouterr().err
        filler.free()
        written = writer.write(spool.cursor, spool.end, 1000, lambda: False)
        assert written == Written(spool.end, 0, len(events) - 3)
        assert capfd.readouterr().err.count("quarantined a progress event of query") == 4
        assert len(quarantine.entries()) == 4
    finally:
        writer.close()
        filler.free()
        spool.close()
