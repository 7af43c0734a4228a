"""`sparkwatch quarantine` list, replay and drop on a hostile quarantine directory, run as a user
runs them (a process): files that are empty, torn, not JSON lines, huge or binary; a directory or
a symlink where the file or its rewrite's temporary belongs; ids that are no text or carry
terminal escapes; lines a CR splits; a history that refuses every write. What is listed is what
a drop or a replay can remove, nothing outside the spool is written, and every error is one line.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from tests.test_cli_quarantine import _replay_held_at_its_write, run_ids_written
from tests.test_collector_support import count_rows, fresh_ids, run_events


def quarantine_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", "quarantine", *args],
                          capture_output=True, text=True, timeout=120)


def listed(spool: Path) -> tuple[list[str], str]:
    """The ids ``list`` shows (escaped as it shows them), and its stderr."""
    done = quarantine_cli("list", "--spool-dir", str(spool))
    assert done.returncode == 0, done.stderr
    *lines, count = done.stdout.splitlines()
    assert count == f"{len(lines)} quarantined event{'s' if len(lines) != 1 else ''}"
    return [line.split("  ")[0] for line in lines], done.stderr


def started_event() -> dict[str, Any]:
    """A readable event: the start of a run of its own."""
    ids = fresh_ids()
    return run_events(query_id=ids["query_id"], run_id=ids["run_id"], terminated=False)[0]


def entry_line(entry_id: Any, event: Any, **more: Any) -> bytes:
    return json.dumps({"id": entry_id, "at": 1.0, "reason": "refused", "event": event,
                       **more}).encode() + b"\n"


def controls(text: str) -> set[str]:
    return {c for c in text if not c.isprintable() and c != "\n"}


@pytest.fixture()
def history(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'history.db'}"
    migrate.upgrade(url)
    return url


# --- what is listed can be removed --------------------------------------------------------------


def test_every_entry_list_shows_can_be_dropped(tmp_path: Path) -> None:
    """An id that is no string (listed as "123") and two entries one CR joins (listed as two)
    matched no line to remove: drop said "dropped 0", exit 0, and they stayed listed."""
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused")])
    with quarantine.path.open("ab") as f:
        f.write(entry_line(123, {"kind": "x"}))
        f.write(entry_line("aaa", 1).rstrip(b"\n") + b"\r" + entry_line("bbb", 2))
    ids, _ = listed(tmp_path)
    done = quarantine_cli("drop", "--spool-dir", str(tmp_path), *ids)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"dropped {len(ids)}\n", "")
    assert listed(tmp_path) == ([], f"sparkwatch quarantine: 2 lines of {quarantine.path} could "
                                    "not be read (torn or corrupt): not listed, and never "
                                    "replayed\n")


def test_a_replay_never_counts_replayed_an_entry_it_leaves_in_the_quarantine(
        tmp_path: Path, history: str) -> None:
    """An entry whose id is no string was written, counted ("replayed 1 of 1", exit 0) and
    left in the file: every replay wrote it again and said the same."""
    spool = tmp_path / "spool"
    spool.mkdir()
    line = entry_line(7, started_event())
    (spool / "quarantine.jsonl").write_bytes(line)
    done = quarantine_cli("replay", "--spool-dir", str(spool), "--history-url", history)
    assert (done.returncode, done.stdout) == (0, "replayed 0 of 0\n"), done.stderr
    assert "1 line of" in done.stderr and "not replayed, kept in the file" in done.stderr
    assert (spool / "quarantine.jsonl").read_bytes() == line


def test_replay_shows_the_ids_it_keeps_escaped(tmp_path: Path, history: str) -> None:
    """"<id>: still unreadable, kept" wrote the file's id as it was: its escapes reached the
    terminal (here: retitle the window, clear the screen)."""
    hostile = "\x1b]2;pwned\x07\x1b[2J\u202e"
    (tmp_path / "quarantine.jsonl").write_bytes(entry_line(hostile, {"kind": "no event"}))
    done = quarantine_cli("replay", "--spool-dir", str(tmp_path), "--history-url", history)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ("\\x1b]2;pwned\\x07\\x1b[2J\\u202e: still unreadable, kept\n"
                           "replayed 0 of 1\n")
    assert controls(done.stdout + done.stderr) == set()
    assert listed(tmp_path)[0] == ["\\x1b]2;pwned\\x07\\x1b[2J\\u202e"]


# --- nothing outside the spool is written -----------------------------------------------------


def test_a_symlink_planted_where_the_rewrite_writes_is_not_followed(tmp_path: Path) -> None:
    """The rewrite opened quarantine.tmp as it found it: a link there truncated and filled the
    file it named, and the quarantine became that link."""
    spool, victim = tmp_path / "spool", tmp_path / "victim.txt"
    spool.mkdir()
    victim.write_text("the user's own file\n")
    quarantine = Quarantine(spool)
    quarantine.add([(started_event(), "refused"), (started_event(), "refused")])
    dropped, kept = quarantine.entries()
    (spool / "quarantine.tmp").symlink_to(victim)
    done = quarantine_cli("drop", "--spool-dir", str(spool), dropped.id)
    assert (done.returncode, done.stdout) == (0, "dropped 1\n"), done.stderr
    assert victim.read_text() == "the user's own file\n"
    assert not quarantine.path.is_symlink()
    assert [e.id for e in quarantine.entries()] == [kept.id]
    assert sorted(p.name for p in spool.iterdir()) == ["quarantine.jsonl", "quarantine.lock"]


def test_a_rewrite_keeps_the_permissions_and_the_owner_of_the_quarantine(tmp_path: Path) -> None:
    """A drop run as root (sudo, kubectl exec) made the collector's file root's own: the
    collector could no longer append to it, and its spool filled."""
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused"), (started_event(), "refused")])
    quarantine.path.chmod(0o640)  # not the 0600 a new file is made with
    os.chown(quarantine.path, 65534, 65534)  # the collector's user; the test runs as root
    done = quarantine_cli("drop", "--spool-dir", str(tmp_path), quarantine.entries()[0].id)
    assert done.returncode == 0, done.stderr
    kept = quarantine.path.stat()
    assert (kept.st_mode & 0o777, kept.st_uid, kept.st_gid) == (0o640, 65534, 65534)
    assert len(quarantine.entries()) == 1


def test_a_lock_a_root_drop_makes_is_the_spool_owners(tmp_path: Path) -> None:
    """Made by a drop run as root (sudo, kubectl exec), the lock was root's, 0600: every append
    of the collector, running as the spool's owner, then failed, and its spool filled."""
    spool = tmp_path / "spool"
    quarantine = Quarantine(spool)
    quarantine.add([(started_event(), "refused"), (started_event(), "refused")])
    (spool / "quarantine.lock").unlink()
    for path in (spool, quarantine.path):
        os.chown(path, 65534, 65534)  # the collector's user; the test runs as root
    done = quarantine_cli("drop", "--spool-dir", str(spool), quarantine.entries()[0].id)
    assert done.returncode == 0, done.stderr
    lock = (spool / "quarantine.lock").stat()
    assert (lock.st_uid, lock.st_gid) == (65534, 65534)


def test_a_link_planted_where_the_lock_belongs_is_not_followed(tmp_path: Path) -> None:
    # Opened to append, the link made a drop create (as root: any) file its target named.
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused")])
    outside = tmp_path / "elsewhere" / "nologin"
    outside.parent.mkdir()
    (tmp_path / "quarantine.lock").unlink()
    (tmp_path / "quarantine.lock").symlink_to(outside)
    done = quarantine_cli("drop", "--spool-dir", str(tmp_path), quarantine.entries()[0].id)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()
    assert "quarantine.lock" in line, line
    assert not outside.exists()
    assert len(quarantine.entries()) == 1


@pytest.mark.parametrize("name", ["quarantine.lock", "quarantine.jsonl"])
def test_a_fifo_where_the_lock_or_the_file_belongs_is_refused_at_once(
        tmp_path: Path, name: str) -> None:
    """Opening a FIFO waits for its other end: drop and list (and the collector's appends)
    waited for good."""
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused")])
    entry = quarantine.entries()[0].id
    (tmp_path / name).unlink()
    os.mkfifo(tmp_path / name)
    # list reads the file without the lock; drop takes the lock, then reads the file.
    commands = [["drop", entry]] + ([["list"]] if name == "quarantine.jsonl" else [])
    for command in commands:
        done = quarantine_cli(command[0], "--spool-dir", str(tmp_path), *command[1:])
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        [line] = done.stderr.splitlines()
        assert line.endswith(f"{tmp_path / name}: not a regular file"), line
    with pytest.raises(OSError, match="not a regular file"):
        quarantine.add([(started_event(), "refused")])


def test_a_directory_where_the_rewrite_writes_is_one_line_and_changes_nothing(
        tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused")])
    held = quarantine.path.read_bytes()
    (tmp_path / "quarantine.tmp").mkdir()
    done = quarantine_cli("drop", "--spool-dir", str(tmp_path), quarantine.entries()[0].id)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"sparkwatch quarantine: error: --spool-dir {tmp_path}: cannot "
                           "rewrite ") and "quarantine.tmp: Is a directory" in line
    assert quarantine.path.read_bytes() == held


def test_a_quarantine_linked_to_a_file_of_another_format_is_listed_as_unreadable(
        tmp_path: Path) -> None:
    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/false\n")
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "quarantine.jsonl").symlink_to(outside)
    assert listed(spool) == ([], f"sparkwatch quarantine: 2 lines of {spool}/quarantine.jsonl "
                                 "could not be read (torn or corrupt): not listed, and never "
                                 "replayed\n")
    assert outside.read_text().startswith("root:x:0:0")


# --- files that are not what they should be ---------------------------------------------------


@pytest.mark.parametrize(("content", "unreadable"), [
    (b"", 0),
    (b"\n\n   \n", 0),
    (b'{"id": "torn", "at": 1, "rea', 1),
    (b"\x00" * 10_000, 1),
    (bytes(range(256)) * 40, 41),  # b"\n" at each 256 bytes: 41 lines
    (b"[" * 100_000 + b"\n", 1),
    (b'{"id": "x", "at": 1, "reason": "r", "event": ' + b'{"a":' * 2000 + b"1" + b"}" * 2001
     + b"\n", 1),
    (b"\xff\xfe" + "\u202e".encode("utf-16-le") + b"\n", 1),
], ids=["empty", "blank lines", "torn", "NULs", "binary", "deep list", "deep event", "utf-16"])
def test_a_file_that_holds_no_entries_is_listed_as_such(
        tmp_path: Path, content: bytes, unreadable: int) -> None:
    (tmp_path / "quarantine.jsonl").write_bytes(content)
    ids, err = listed(tmp_path)
    assert ids == []
    assert err == ("" if not unreadable else
                   f"sparkwatch quarantine: {unreadable} line{'s' if unreadable > 1 else ''} "
                   f"of {tmp_path}/quarantine.jsonl could not be read (torn or corrupt): not "
                   "listed, and never replayed\n")


def test_a_line_of_64_mb_among_entries_is_passed_over_and_kept_by_a_drop(
        tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused"), (started_event(), "refused")])
    with quarantine.path.open("ab") as f:
        f.write(b"x" * (64 << 20) + b"\n")
    first, second = quarantine.entries()
    done = quarantine_cli("drop", "--spool-dir", str(tmp_path), first.id)
    assert (done.returncode, done.stdout) == (0, "dropped 1\n"), done.stderr
    ids, err = listed(tmp_path)
    assert ids == [second.id] and err.startswith("sparkwatch quarantine: 1 line of")
    assert quarantine.path.stat().st_size > 64 << 20


def test_a_spool_path_with_newlines_and_escapes_is_named_escaped(tmp_path: Path) -> None:
    spool = tmp_path / "spool\n\x1b[2Jx"
    done = quarantine_cli("list", "--spool-dir", str(spool))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"sparkwatch quarantine: error: --spool-dir {tmp_path}/spool\\x0a"
                           "\\x1b[2Jx: the spool directory does not exist\n")


# --- a history that refuses ---------------------------------------------------------------------


def test_replay_into_a_read_only_postgresql_history_keeps_every_entry(
        tmp_path: Path, pg_url: str) -> None:
    migrate.upgrade(pg_url)
    database = sa.engine.make_url(pg_url).database
    engine = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'alter database "{database}" set '
                                 "default_transaction_read_only = on"))
    finally:
        engine.dispose()
    quarantine = Quarantine(tmp_path)
    quarantine.add([(started_event(), "refused") for _ in range(3)])
    held = quarantine.path.read_bytes()
    done = quarantine_cli("replay", "--spool-dir", str(tmp_path), "--history-url", pg_url)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    # After the history writer's own INFO line of the schema it found.
    *_, line = done.stderr.splitlines()
    assert "Traceback" not in done.stderr
    assert line == ("sparkwatch quarantine: error: the history refuses every write (cannot "
                    "execute INSERT in a read-only transaction): replayed 0 of 3, the rest kept")
    assert quarantine.path.read_bytes() == held


def test_a_replay_stopped_by_ctrl_c_then_run_again_writes_each_entry_once(
        tmp_path: Path, pg_url: str) -> None:
    """Ctrl-C while a write waits: what the first replay says it wrote left the quarantine, the
    second writes exactly the rest; every run is in the history once and none is left."""
    migrate.upgrade(pg_url)
    events = [started_event() for _ in range(150)]
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in events])
    with _replay_held_at_its_write(tmp_path, pg_url) as replay:
        replay.send_signal(signal.SIGINT)
    out, err = replay.communicate(timeout=120)
    assert replay.returncode == 130 and "Traceback" not in err, err
    first = int(re.fullmatch(r"stopped: replayed (\d+) of 150, the rest kept\n", out)[1])
    assert len(quarantine.entries()) == 150 - first
    done = quarantine_cli("replay", "--spool-dir", str(tmp_path), "--history-url", pg_url)
    assert (done.returncode, done.stdout) == (0, f"replayed {150 - first} of {150 - first}\n")
    assert count_rows(pg_url, "select count(*) from query_runs") == 150
    assert run_ids_written(pg_url) == {e["payload"]["runId"] for e in events}
    assert quarantine.scan() == ([], 0)
