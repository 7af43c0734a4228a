"""The spool on a real disk: order, bound, commit, recovery from a torn write, exclusivity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.spool import Spool, SpoolBusy, SpoolFull


def drain(spool: Spool, batch: int = 3, reads: int = 100) -> list:
    """What read-and-commit rounds take out until the spool is empty, in at most ``reads``."""
    out = []
    for _ in range(reads):
        if spool.is_empty():
            return out
        records, position = spool.read(batch)
        out.extend(records)
        spool.commit(position)
    raise AssertionError(f"still not empty after {reads} reads: cursor {spool.cursor}, "
                         f"end {spool.end}")


def test_records_come_back_in_order_across_segments_and_reopen(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20, segment_bytes=64)
    for i in range(50):
        spool.append([{"i": i}])
    records, position = spool.read(10)
    assert [r[0]["i"] for r in records] == list(range(10))
    spool.commit(position)
    spool.close()

    reopened = Spool(tmp_path, 1 << 20, segment_bytes=64)
    assert [r[0]["i"] for r in reopened.pending()] == list(range(10, 50))
    assert [r[0]["i"] for r in drain(reopened)] == list(range(10, 50))
    assert reopened.pending_bytes == 0
    assert len(list(tmp_path.glob("*.wal"))) == 1, "finished segments are deleted"


def test_the_bound_refuses_appends_and_commits_free_room(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 200)
    spool.append(["x" * 80])
    spool.append(["x" * 80])
    with pytest.raises(SpoolFull, match="bound of 200 bytes"):
        spool.append(["x" * 80])
    drain(spool)
    spool.append(["x" * 80])


def test_a_torn_last_record_is_cut_off_and_the_rest_kept(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    spool.append([1])
    spool.append([2])
    spool.close()
    segment = next(tmp_path.glob("*.wal"))
    with open(segment, "ab") as f:  # a crash in the middle of a third append
        f.write(b"\x00\x00\x01\x00\x12\x34")
    reopened = Spool(tmp_path, 1 << 20)
    reopened.append([3])
    assert list(reopened.pending()) == [[1], [2], [3]]


def test_a_crash_right_after_a_rotation_leaves_a_spool_that_drains_to_empty(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path, 1 << 20, segment_bytes=64)
    for i in range(5):
        spool.append([{"i": i}])
    spool.close()
    newest = max(tmp_path.glob("*.wal"))
    # A crash (kill -9, power loss) after the next segment was created, before its first record.
    newest.with_name(f"{int(newest.stem) + 1:012d}.wal").touch()

    reopened = Spool(tmp_path, 1 << 20, segment_bytes=64)
    assert [r[0]["i"] for r in drain(reopened)] == list(range(5))
    assert not reopened.wait(0.05), "an empty spool wakes no reader"
    assert reopened.pending_bytes == 0
    assert len(list(tmp_path.glob("*.wal"))) == 1, "the finished segments are deleted"
    reopened.append([{"i": 5}])
    assert reopened.wait(0.05)
    assert drain(reopened) == [[{"i": 5}]]


def test_a_second_process_cannot_open_the_same_spool(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 1 << 20)
    with pytest.raises(SpoolBusy, match="in use"):
        Spool(tmp_path, 1 << 20)
    spool.close()
    Spool(tmp_path, 1 << 20).close()


def test_records_appended_together_are_all_kept_or_none(tmp_path: Path) -> None:
    spool = Spool(tmp_path, 400)
    spool.append([0])

    def failing() -> Iterator[bytes]:
        yield b"[1]"
        raise ValueError("an event could not be encoded")

    with pytest.raises(ValueError, match="could not be encoded"):
        spool.append_all(failing())
    with pytest.raises(SpoolFull, match="bound of 400 bytes"):  # the third passes the bound
        spool.append_all([b'["' + b"x" * 150 + b'"]'] * 3)
    start, end = spool.append_all([b"[2]", b"[3]"])
    assert list(spool.pending()) == [[0], [2], [3]]
    assert end == spool.end and start < end
    assert spool.write_failures == 0, "refusals that are not the disk's are not write failures"
    spool.close()
    assert list(Spool(tmp_path, 400).pending()) == [[0], [2], [3]]
