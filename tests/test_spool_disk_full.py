"""The spool on a real full filesystem (a 2 MiB tmpfs): a refused write leaves nothing behind,
the spool works again once there is room, and every record it acknowledged is read back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.spool import Spool, SpoolWriteFailed
from tests.test_collector_spool import drain
from tests.tmpfs import Filler, free_bytes, small_filesystem

SEGMENT = 256 << 10


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_filesystem(tmp_path / "disk", "2m") as mounted:
        yield mounted


def record(i: int, size: int) -> list[dict[str, object]]:
    return [{"i": i, "pad": "x" * size}]


def append_all(spool: Spool, sizes: list[int], start: int, acked: list) -> int:
    """Append records of ``sizes``; those acknowledged go into ``acked``; the failures count."""
    failures = 0
    for n, size in enumerate(sizes):
        item = record(start + n, size)
        try:
            spool.append(item)
        except SpoolWriteFailed:
            failures += 1
        else:
            acked.append(item)
    return failures


def test_a_full_disk_refuses_appends_cleanly_and_every_acknowledged_record_survives(
    disk: Path,
) -> None:
    spool = Spool(disk / "spool", 64 << 20, fsync=True, segment_bytes=SEGMENT)
    filler = Filler(disk / "filler")
    acked: list = []
    assert append_all(spool, [2000] * 20, 0, acked) == 0

    # Room for a few small records, not for a large one: the large ones are torn mid-write.
    filler.fill(leave=12 << 10)
    sizes = [40_000, 300, 40_000, 300, 300, 90_000, 300] * 3
    failures = append_all(spool, sizes, 100, acked)
    assert failures >= 6, "every record larger than the room left was refused"
    assert spool.write_failures == failures
    assert len(acked) > 20, "small records that fitted were still accepted"
    with pytest.raises(SpoolWriteFailed, match="No space left on device"):
        spool.append(record(999, 200_000))

    filler.free()  # space is back: no reopen, no restart
    assert append_all(spool, [5000] * 100, 1000, acked) == 0, "appends work again"
    assert list(spool.pending()) == acked
    spool.close()

    reopened = Spool(disk / "spool", 64 << 20, fsync=True, segment_bytes=SEGMENT)
    assert list(reopened.pending()) == acked
    records, _ = reopened.read(10_000)
    assert records == acked
    reopened.close()


def test_a_commit_on_a_full_disk_still_frees_the_finished_segments(disk: Path) -> None:
    spool = Spool(disk / "spool", 64 << 20, fsync=True, segment_bytes=SEGMENT)
    filler = Filler(disk / "filler")
    acked: list = []
    append_all(spool, [50_000] * 15, 0, acked)  # three segments or so
    filler.fill()
    before = free_bytes(disk)
    records, position = spool.read(10)  # the first ten records are done
    spool.commit(position)  # its cursor file cannot be written: no error, room freed
    assert spool.write_failures == 1
    assert free_bytes(disk) > before
    assert append_all(spool, [20_000], 100, acked) == 0, "the freed room takes new records"
    spool.close()

    filler.free()
    # The cursor on disk is older than the commit: the reopened spool starts at the oldest
    # segment left, i.e. replays at most what was done already, and loses nothing.
    reopened = Spool(disk / "spool", 64 << 20, fsync=True, segment_bytes=SEGMENT)
    pending = list(reopened.pending())
    assert pending[-(len(acked) - 10):] == acked[10:]
    assert all(r in acked[:10] for r in pending[:-(len(acked) - 10)])
    reopened.close()


def test_records_appended_together_on_a_full_disk_leave_nothing_behind(disk: Path) -> None:
    spool = Spool(disk / "spool", 64 << 20, fsync=True, segment_bytes=SEGMENT)
    spool.append(record(0, 100))
    Filler(disk / "filler").fill(leave=16 << 10)
    parts = [json.dumps(record(i, 6000)).encode() for i in range(1, 10)]  # ~54 KB together
    with pytest.raises(SpoolWriteFailed):
        spool.append_all(parts)  # the first two fit, the third does not: none is kept
    spool.append_all(parts[:1])  # the room the failed ones took is free again
    assert list(spool.pending()) == [record(0, 100), record(1, 6000)]
    spool.close()
    assert list(Spool(disk / "spool", 64 << 20).pending()) == [record(0, 100), record(1, 6000)]


def test_a_refused_first_record_of_a_new_segment_leaves_a_spool_that_drains_to_empty(
    disk: Path,
) -> None:
    spool = Spool(disk / "spool", 64 << 20, fsync=True, segment_bytes=SEGMENT)
    acked: list = []
    assert append_all(spool, [60_000] * 4, 0, acked) == 0  # the segment is nearly full
    Filler(disk / "filler").fill()
    # The next record starts a new segment (a file needs no data block), and its write fails.
    with pytest.raises(SpoolWriteFailed, match="No space left on device"):
        spool.append(record(4, 60_000))
    assert spool.end.offset == 0 and spool.end.segment == 1

    assert drain(spool, batch=2, reads=10) == acked
    assert not spool.wait(0.05), "the reader is not woken for nothing"
    spool.close()
