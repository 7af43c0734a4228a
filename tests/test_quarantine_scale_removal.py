"""How a replay removes what it wrote without rewriting the quarantine for each batch: one byte
over the line's opening brace, made durable before the lock is let go, so that the line is no
entry for anyone (list, drop, another replay, the collector's appends) and the next rewrite
leaves it out. A replay that read the file before a drop or another replay rewrote it finds its
entries in the new file; the collector's append makes room from removed lines rather than
refuse an entry as over the bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkwatch.cli.main import main
from sparkwatch.collector.quarantine import COMPACT_SHARE, Quarantine, QuarantineFull


def events(count: int) -> list[dict[str, Any]]:
    return [{"kind": "idle", "payload": {"id": f"q{n}", "pad": "x" * 200}} for n in range(count)]


def filled(spool: Path, count: int, max_bytes: int = 1 << 20) -> tuple[Quarantine, list[str]]:
    """A quarantine of ``count`` entries; their ids, in the file's order."""
    quarantine = Quarantine(spool, max_bytes)
    assert quarantine.add([(e, "refused") for e in events(count)]) == count
    return quarantine, [e.id for e in quarantine.entries()]


def remove_in_place(quarantine: Quarantine, ids: list[str]) -> list[str]:
    """What a replay does for ``ids`` once the history holds them, without its last rewrite:
    the ids it found held, and removed."""
    with quarantine.replaying() as replay, replay.held(ids) as held:
        found = [e.id for e in held]
        replay.remove_locked(found)
    return found


def lines_of(quarantine: Quarantine) -> list[bytes]:
    return quarantine.path.read_bytes().splitlines(keepends=True)


def test_an_entry_a_replay_removed_is_one_byte_changed_and_is_no_longer_listed_or_unreadable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine, ids = filled(tmp_path, 10)
    before = quarantine.path.read_bytes()
    inode = quarantine.path.stat().st_ino
    assert remove_in_place(quarantine, [ids[3]]) == [ids[3]]
    after = quarantine.path.read_bytes()
    # Written in place, in the same file (a crash writes one byte whole or not at all).
    assert quarantine.path.stat().st_ino == inode
    assert [n for n, (a, b) in enumerate(zip(before, after, strict=True)) if a != b] == \
        [len(b"".join(lines_of(quarantine)[:3]))]
    assert [e.id for e in quarantine.entries()] == ids[:3] + ids[4:]
    assert quarantine.scan()[1] == 0
    assert main(["quarantine", "list", "--spool-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert (out.splitlines()[-1], err) == ("9 quarantined events", "")


def test_a_drop_after_a_replay_removed_entries_in_place_rewrites_the_file_without_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine, ids = filled(tmp_path, 4)
    kept = lines_of(quarantine)[2:]
    remove_in_place(quarantine, ids[:1])
    assert main(["quarantine", "drop", "--spool-dir", str(tmp_path), ids[1]]) == 0
    assert capsys.readouterr().out == "dropped 1\n"
    assert lines_of(quarantine) == kept


def test_a_drop_of_an_entry_a_replay_removed_says_it_is_not_in_the_quarantine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine, ids = filled(tmp_path, 2)
    held = quarantine.path.read_bytes()
    remove_in_place(quarantine, ids[:1])
    removed = quarantine.path.read_bytes()
    assert main(["quarantine", "drop", "--spool-dir", str(tmp_path), ids[0]]) == 2
    out, err = capsys.readouterr()
    assert out == "dropped 0\n"
    assert err == (f"sparkwatch quarantine: error: not in the quarantine: '{ids[0]}' "
                   "(see `sparkwatch quarantine list`)\n")
    assert quarantine.path.read_bytes() == removed != held  # nothing rewritten


def test_an_entry_one_replay_removed_is_not_held_for_another_that_read_the_file_before(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 10)
    with quarantine.replaying() as first, quarantine.replaying() as second:
        assert first.ids == second.ids == ids
        with first.held(ids[:2]) as held:
            first.remove_locked([e.id for e in held])
        with second.held(ids[:4]) as held:
            assert [e.id for e in held] == ids[2:4]
            second.remove_locked([e.id for e in held])
    assert [e.id for e in quarantine.entries()] == ids[4:]


def test_a_replay_finds_its_entries_in_the_file_a_drop_rewrote_after_it_read_it(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 6)
    original = {e.id: e for e in quarantine.entries()}
    with quarantine.replaying() as replay:
        assert quarantine.remove({ids[0], ids[2]}) == 2  # offsets of the others move
        with replay.held(ids) as held:
            assert held == [original[i] for i in (ids[1], ids[3], ids[4], ids[5])]
            replay.remove_locked([ids[1], ids[4]])
        replay.finish()
    assert [e.id for e in quarantine.entries()] == [ids[3], ids[5]]
    assert quarantine.scan()[1] == 0


def test_entries_appended_while_a_replay_runs_stay_and_are_not_replayed_by_it(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 4)
    late = {"kind": "idle", "payload": {"id": "late"}}
    with quarantine.replaying() as replay:
        with replay.held(ids[:2]) as held:
            replay.remove_locked([e.id for e in held])
        assert quarantine.add([(late, "refused")]) == 1
        with replay.held(ids[2:]) as held:
            replay.remove_locked([e.id for e in held])
        replay.finish()
    assert [e.event for e in quarantine.entries()] == [late]
    assert quarantine.scan()[1] == 0


def test_a_replay_rewrites_the_file_once_its_removed_lines_hold_half_of_it(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 10)
    size = quarantine.path.stat().st_size
    lengths = [len(line) for line in lines_of(quarantine)]
    inode = quarantine.path.stat().st_ino
    rewritten_at = []
    with quarantine.replaying() as replay:
        for n, entry_id in enumerate(ids):
            # Before a batch (not while one holds the lock): once half is removed.
            with replay.held([entry_id]) as held:
                if quarantine.path.stat().st_ino != inode:
                    rewritten_at.append(n)
                    inode = quarantine.path.stat().st_ino
                    # Without the removed lines; the replay goes on in the new file.
                    assert [e.id for e in quarantine.entries()] == ids[n:]
                    assert len(lines_of(quarantine)) == len(ids) - n
                assert [e.id for e in held] == [entry_id]
                replay.remove_locked([entry_id])
        replay.finish()
    assert quarantine.path.read_bytes() == b""
    # The first rewrite once the first lines hold half of the file.
    first = next(n for n in range(len(ids)) if sum(lengths[:n]) * COMPACT_SHARE >= size)
    assert rewritten_at[0] == first


def test_a_replay_that_ends_without_finishing_leaves_removed_lines_the_next_one_clears(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 4)
    remove_in_place(quarantine, ids[:1])  # as after Ctrl-C: no rewrite on the way out
    kept = lines_of(quarantine)[1:]
    with quarantine.replaying() as replay:
        assert replay.ids == ids[1:] and replay.unreadable == 0
        replay.finish()
    assert lines_of(quarantine) == kept


def test_an_append_that_would_fill_the_quarantine_first_rewrites_it_without_removed_lines(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 4)
    # Full: an entry as large as the others does not fit (their times may take a byte more).
    quarantine.max_bytes = quarantine.path.stat().st_size + 8
    new = events(5)[4]
    with pytest.raises(QuarantineFull):
        quarantine.add([(new, "refused")])
    remove_in_place(quarantine, ids[:1])  # a quarter: not rewritten by the replay
    assert len(lines_of(quarantine)) == 4
    assert quarantine.add([(new, "refused")]) == 1
    assert [e.id for e in quarantine.entries()][:3] == ids[1:]
    assert [e.event for e in quarantine.entries()][3] == new
    assert quarantine.scan()[1] == 0 and len(lines_of(quarantine)) == 4


def test_an_entry_a_replay_removed_is_quarantined_again_when_refused_again(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 2)
    remove_in_place(quarantine, ids[:1])
    first = events(2)[0]
    assert quarantine.add([(first, "refused again")]) == 1
    assert [(e.id, e.reason) for e in quarantine.entries()] == \
        [(ids[1], "refused"), (ids[0], "refused again")]


def test_an_event_given_twice_in_one_append_is_added_once(tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path)
    event, other = events(2)
    assert quarantine.add([(event, "first"), (other, "refused"), (event, "second")],
                          ["acme", "default", "beta"]) == 2
    assert [(e.event, e.reason, e.tenant) for e in quarantine.entries()] == \
        [(event, "first", "acme"), (other, "refused", "default")]


def test_an_append_finds_an_entry_written_by_hand_in_another_layout(tmp_path: Path) -> None:
    """An append reads the id of a line as it writes one from its first bytes, and parses any
    other line: an entry written by hand is held once all the same."""
    quarantine = Quarantine(tmp_path)
    event = events(1)[0]
    quarantine.add([(event, "refused")])
    [entry] = quarantine.entries()
    quarantine.path.write_text(
        f'  {{"reason": "by hand", "at": 1, "event": {{"kind": "idle", "payload": '
        f'{{"id": "q0", "pad": "{"x" * 200}"}}}}, "id": "{entry.id}"}}\n')
    assert [e.id for e in quarantine.entries()] == [entry.id]
    assert quarantine.add([(event, "refused")]) == 0


def test_a_rewrite_planned_without_the_lock_keeps_what_changed_before_its_copy(
    tmp_path: Path
) -> None:
    """A replay decides which lines its rewrite leaves out without the lock (reading a full
    quarantine takes seconds), then copies under it. Meanwhile the collector may append (here
    the plan even reads the last line half-written), and another replay may remove an entry the
    plan keeps: the copy keeps the append whole and the entry removed."""
    from sparkwatch.collector import quarantine as module

    quarantine, ids = filled(tmp_path, 6)
    remove_in_place(quarantine, ids[:3])
    late = events(8)[7]
    half = quarantine.path.read_bytes()
    with quarantine.path.open("ab") as f:
        f.write(b'{"id": "0123456789abcdef", "at": 1, "rea')  # an append being written
    with open(quarantine.path, "rb") as planned:
        plan = module._plan(planned, set(), whole=False)
        assert len(plan.leave) == 3 and plan.end == len(half)
        with quarantine.path.open("ab") as f:
            f.write(b'son": "r", "event": {"kind": "idle"}}\n')  # the append, done
        assert quarantine.add([(late, "refused")]) == 1
        assert remove_in_place(quarantine, [ids[4]]) == [ids[4]]
        with quarantine._locked():
            quarantine._write_locked(planned, plan)
    assert [e.id for e in quarantine.entries()] == \
        [ids[3], ids[5], "0123456789abcdef", quarantine.entries()[-1].id]
    assert quarantine.entries()[-1].event == late
    assert quarantine.scan()[1] == 0
    # The three removed before the plan left out; the one removed since still there, removed.
    assert len(lines_of(quarantine)) == 5
