"""The collector appends to the quarantine while a replay rewrites it. The replay plans its
rewrite without the lock (which lines to leave out: reading a full quarantine takes seconds),
then copies under it. An append that failed meanwhile (a disk full mid-write) is cut back to
where it began, and an append that worked may then take its place, before the replay gets the
lock: the copy keeps that append whole, byte for byte, and nothing of the failed one. The
rewrite copied what its plan had read ahead (a buffered reader's seek back within what it holds
reads no file): the failed append's line, and the tail of the good one as a torn line."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.collector.quarantine import Quarantine, entry_id
from tests.support import wait_for
from tests.test_quarantine_scale_removal import events, filled, lines_of


def someone_waits_for_the_lock(quarantine: Quarantine) -> bool:
    """Whether /proc/locks shows a flock of the quarantine's lock file blocked (``->``)."""
    lock = os.stat(quarantine.path.with_suffix(".lock"))
    inode = f"{os.major(lock.st_dev):02x}:{os.minor(lock.st_dev):02x}:{lock.st_ino} "
    return any("-> FLOCK" in line and inode in line
               for line in Path("/proc/locks").read_text().splitlines())


def added_line(event: Any) -> str:
    """The line Quarantine.add writes for ``event``."""
    return json.dumps({"id": entry_id(event), "at": time.time(), "reason": "refused",
                       "event": event}, ensure_ascii=True) + "\n"


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="no /proc/locks to see a lock wait")
def test_an_append_made_after_a_failed_one_while_a_replay_plans_its_rewrite_survives_it(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 10)
    done: list[str] = []
    late = added_line(events(11)[10])
    with quarantine.replaying() as replay:
        with replay.held(ids[:6]) as held:  # past half: the next batch rewrites first
            replay.remove_locked([e.id for e in held])
        size = quarantine.path.stat().st_size
        inode = quarantine.path.stat().st_ino
        kept = lines_of(quarantine)[7:]  # the entries of ids[7:]
        # Its first line whole, and shorter than the append that takes its place.
        failed = b'{"id": "fa11edfa11edfa11", "at": 1, "reason": "r", "event": 1}\n{"id": "fa'
        assert len(failed) < len(late)

        def next_batch() -> None:
            with replay.held(ids[6:7]) as held:
                done.extend(e.id for e in held)
                replay.remove_locked(done)

        batch = threading.Thread(target=next_batch)
        with quarantine._locked():
            # The collector's append, half written when the disk filled: the replay's plan,
            # made without the lock, reads its first line.
            with quarantine.path.open("ab") as f:
                f.write(failed)
            batch.start()
            wait_for(lambda: someone_waits_for_the_lock(quarantine), 10,
                     "the replay to plan its rewrite and wait for the lock")
            # The failed append cut back, as Quarantine._append cuts it back; the collector's
            # next append, which worked, in its place: all before the replay has the lock.
            os.truncate(quarantine.path, size)
            quarantine._append([late], size)
        batch.join(10)
        assert not batch.is_alive() and done == [ids[6]]
        assert quarantine.path.stat().st_ino != inode  # rewritten
        assert [e.id for e in quarantine.entries()] == ids[7:] + [entry_id(events(11)[10])]
        assert quarantine.scan()[1] == 0
        replay.finish()
    assert lines_of(quarantine) == kept + [late.encode()]
