"""A replay's rewrite of the quarantine (leaving out the lines it removed in place) that fails
fails nothing else: the removals are durable already, each one byte fsynced in place, and the
lines they removed are no entries for anyone. The replay says why in one line naming the path,
exits as it would have, and the next replay (or drop, or full append) rewrites the file. A
failed rewrite ended the replay with an error (exit 2) after its removals had worked."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sparkwatch.collector.quarantine import Quarantine
from tests.support import run_cli
from tests.test_cli_quarantine import _started_events, run_ids_written, spool_and_history
from tests.test_quarantine_scale_removal import filled, lines_of


@contextmanager
def rewrite_blocked(spool: Path) -> Iterator[str]:
    """The rewrite's temporary file made impossible to write, for real (a directory at its name:
    that stops root too, where a read-only spool would not); yields the reason the system gives."""
    (spool / "quarantine.tmp").mkdir()
    yield "Is a directory"
    (spool / "quarantine.tmp").rmdir()


def test_a_replay_whose_rewrite_fails_keeps_its_removals_warns_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spool, history = spool_and_history(tmp_path)
    events = _started_events(3)
    quarantine = Quarantine(spool)
    assert quarantine.add([(e, "refused") for e in events]) == 3
    held = quarantine.path.read_bytes()
    argv = ("quarantine", "replay", "--spool-dir", str(spool), "--history-url", history)
    with rewrite_blocked(spool) as reason:
        code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (0, "replayed 3 of 3\n"), err
    assert err == (f"sparkwatch quarantine: warning: --spool-dir {spool}: cannot rewrite "
                   f"{spool / 'quarantine.tmp'}: {reason}: the entries replayed are removed "
                   "in place; the next replay or drop leaves them out of the file\n")
    assert run_ids_written(history) == {e["payload"]["runId"] for e in events}
    # Removed in place: the same bytes but each line's opening brace.
    assert quarantine.scan() == ([], 0)
    assert quarantine.path.read_bytes() == held.replace(b'\n{"id"', b'\n "id"') \
        .replace(b'{"id"', b' "id"', 1)
    assert run_cli(capsys, *argv) == (0, "replayed 0 of 0\n", "")
    assert quarantine.path.read_bytes() == b""


def test_a_rewrite_that_fails_mid_replay_leaves_the_replay_going_and_the_file_whole(
    tmp_path: Path
) -> None:
    quarantine, ids = filled(tmp_path, 10)
    (tmp_path / "quarantine.tmp").mkdir()
    with quarantine.replaying() as replay:
        for entry_id in ids[:8]:  # past half removed: a rewrite before each batch from then
            with replay.held([entry_id]) as held:
                assert [e.id for e in held] == [entry_id]
                replay.remove_locked([entry_id])
        replay.finish()
        assert isinstance(replay.compact_error, IsADirectoryError)
        assert replay.compact_error.filename == str(tmp_path / "quarantine.tmp")
    assert quarantine.scan() == (quarantine.entries(), 0)
    assert [e.id for e in quarantine.entries()] == ids[8:]
    assert len(lines_of(quarantine)) == 10
