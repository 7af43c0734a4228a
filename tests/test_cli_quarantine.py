"""`sparkwatch quarantine` on the file beside the spool: a rewrite (drop, or a replay that writes
some entries) keeps every other entry exactly as it was, tenant included; a spool directory that
is missing, a file, or unwritable, or a quarantine file that is a directory, is a one-line usage
error naming it (exit 2), and a command that reads or rewrites the quarantine never makes a
spool."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.cli.main import main
from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from tests.support import wait_for
from tests.test_collector_support import count_rows, fresh_ids, run_events

ACME_EVENT = {"kind": "progress", "payload": {"id": "q-acme"}}
OTHER_EVENT = {"kind": "progress", "payload": {"id": "q-other"}}


def _two_tenants(spool: Path) -> tuple[Quarantine, str, str]:
    """A quarantine holding one entry of tenant acme, then one of tenant beta: their ids."""
    quarantine = Quarantine(spool)
    quarantine.add([(ACME_EVENT, "refused")], ["acme"])
    quarantine.add([(OTHER_EVENT, "refused")], ["beta"])
    acme, beta = quarantine.entries()
    return quarantine, acme.id, beta.id


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the command, check it failed as a usage error in one line; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = err.splitlines()
    assert line.startswith("sparkwatch quarantine: error: ")
    return line


def test_dropping_an_entry_keeps_the_tenant_and_bytes_of_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine, acme_id, beta_id = _two_tenants(tmp_path)
    acme_line = quarantine.path.read_bytes().splitlines(keepends=True)[0]
    assert main(["quarantine", "drop", "--spool-dir", str(tmp_path), beta_id]) == 0
    assert capsys.readouterr().out == "dropped 1\n"
    [kept] = quarantine.entries()
    assert (kept.id, kept.tenant, kept.event) == (acme_id, "acme", ACME_EVENT)
    assert quarantine.path.read_bytes() == acme_line


def test_a_partial_replay_keeps_the_tenant_of_the_entries_it_keeps(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    quarantine = Quarantine(tmp_path / "spool")
    unreadable = {"kind": "progress", "payload": "not an object"}
    quarantine.add([(unreadable, "unreadable")], ["acme"])
    kept_line = quarantine.path.read_bytes()
    quarantine.add([(run_events()[0], "refused")])  # readable: this one is written
    migrate.upgrade(sqlite_url)
    assert main(["quarantine", "replay", "--spool-dir", str(tmp_path / "spool"),
                 "--history-url", sqlite_url]) == 1
    assert "replayed 1 of 2" in capsys.readouterr().out
    [kept] = quarantine.entries()
    assert (kept.tenant, kept.event) == ("acme", unreadable)
    assert quarantine.path.read_bytes() == kept_line


def test_list_of_a_missing_spool_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexist"
    line = _usage_error(capsys, ["quarantine", "list", "--spool-dir", str(missing)])
    assert line.endswith(f"--spool-dir {missing}: the spool directory does not exist")


def test_list_when_the_quarantine_file_is_a_directory_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "quarantine.jsonl").mkdir()
    line = _usage_error(capsys, ["quarantine", "list", "--spool-dir", str(tmp_path)])
    assert line.endswith(
        f"--spool-dir {tmp_path}: cannot read {tmp_path / 'quarantine.jsonl'}: Is a directory")


def test_drop_in_a_missing_spool_directory_is_a_usage_error_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexist" / "x"
    line = _usage_error(capsys, ["quarantine", "drop", "--spool-dir", str(missing), "abc"])
    assert line.endswith(f"--spool-dir {missing}: the spool directory does not exist")
    assert list(tmp_path.iterdir()) == []


def test_drop_with_a_spool_dir_that_is_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "spool"
    a_file.write_text("not a directory")
    line = _usage_error(capsys, ["quarantine", "drop", "--spool-dir", str(a_file), "abc"])
    assert line.endswith(f"--spool-dir {a_file}: not a directory")
    assert a_file.read_text() == "not a directory"


def test_drop_in_an_unwritable_spool_directory_is_a_usage_error(
    capsys: pytest.CaptureFixture[str]
) -> None:
    # /proc: a directory nobody (root included) can create files in.
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc on this system")
    line = _usage_error(capsys, ["quarantine", "drop", "--spool-dir", "/proc", "abc"])
    assert "--spool-dir /proc: cannot rewrite /proc/quarantine.lock: " in line


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("postgresql://u:secret@[::1:5432/x", "not a database URL: <unparseable URL> "
         "(expected sqlite:///FILE or postgresql://USER@HOST[:PORT]/DB)"),
        ("postgresql://u:secret@h:99999/x", "port 99999 is out of range 0-65535"),
        ("mysql://u:secret@h/x", "unsupported database 'mysql' in mysql://u:***@h/x: the "
         "history supports sqlite and postgresql"),
    ],
)
def test_replay_to_a_bad_history_url_names_the_flag_or_the_variable(
    tmp_path: Path, url: str, error: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    quarantine, _, _ = _two_tenants(tmp_path)
    held = quarantine.path.read_bytes()
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path),
                                 "--history-url", url])
    assert line == f"sparkwatch quarantine: error: --history-url: {error}"
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_HISTORY_URL", url)
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path)])
    assert line == f"sparkwatch quarantine: error: SPARKWATCH_COLLECTOR_HISTORY_URL: {error}"
    assert "secret" not in line
    assert quarantine.path.read_bytes() == held


@pytest.mark.parametrize("value", ["off", ""])
def test_replay_with_the_history_turned_off_in_the_environment_says_so(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collector reads 'off' (or nothing) as no history; there is nowhere to replay to."""
    _two_tenants(tmp_path)
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_HISTORY_URL", value)
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path)])
    assert line == (f"sparkwatch quarantine: error: SPARKWATCH_COLLECTOR_HISTORY_URL={value!r}: "
                    "the history is off: give --history-url")


def test_replay_to_an_empty_history_url_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_tenants(tmp_path)
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path),
                                 "--history-url", ""])
    assert line == "sparkwatch quarantine: error: --history-url is empty: give a database URL"


def test_a_bad_history_url_is_refused_even_with_nothing_to_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path),
                                 "--history-url", "garbage"])
    assert line.startswith("sparkwatch quarantine: error: --history-url: not a database URL")


@pytest.mark.parametrize("action", ["list", "drop"])
def test_an_empty_spool_dir_is_a_usage_error_not_the_current_directory(
    action: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path('') is '.': an unset variable in a script read the quarantine of the directory the
    command ran in."""
    _two_tenants(tmp_path)
    monkeypatch.chdir(tmp_path)
    ids = ["abc"] if action == "drop" else []
    command = f"sparkwatch quarantine {action}: error: argument --spool-dir:"
    with pytest.raises(SystemExit, match="^2$"):
        main(["quarantine", action, "--spool-dir", "", *ids])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"{command} the path is empty: give the collector's spool directory")
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_SPOOL_DIR", "")
    with pytest.raises(SystemExit, match="^2$"):
        main(["quarantine", action, *ids])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"{command} SPARKWATCH_COLLECTOR_SPOOL_DIR is empty: give the collector's spool "
        "directory")
    assert len(Quarantine(tmp_path).entries()) == 2


def test_a_missing_spool_directory_from_the_environment_names_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nonexist"
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_SPOOL_DIR", str(missing))
    line = _usage_error(capsys, ["quarantine", "list"])
    assert line.endswith(
        f"SPARKWATCH_COLLECTOR_SPOOL_DIR={missing}: the spool directory does not exist")


def test_replay_of_ids_not_in_the_quarantine_is_refused_and_writes_nothing(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped id did nothing and exited 0 ("replayed 0 of 0"), as if the work were done."""
    quarantine = Quarantine(tmp_path)
    quarantine.add([(run_events()[0], "refused")])
    [entry] = quarantine.entries()
    held = quarantine.path.read_bytes()
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path),
                                 "--history-url", sqlite_url, entry.id, "nosuchid", "\udcff"])
    assert line == ("sparkwatch quarantine: error: not in the quarantine: 'nosuchid', "
                    "'\\udcff' (see `sparkwatch quarantine list`)")
    assert quarantine.path.read_bytes() == held
    assert not (tmp_path / "history.db").exists()


def test_drop_of_ids_not_in_the_quarantine_drops_the_others_and_names_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped id did nothing and exited 0 ("dropped 0"), as if the work were done."""
    quarantine, acme_id, beta_id = _two_tenants(tmp_path)
    assert main(["quarantine", "drop", "--spool-dir", str(tmp_path), acme_id, "nosuchid"]) == 2
    out, err = capsys.readouterr()
    assert out == "dropped 1\n"
    assert err == ("sparkwatch quarantine: error: not in the quarantine: 'nosuchid' "
                   "(see `sparkwatch quarantine list`)\n")
    assert [e.id for e in quarantine.entries()] == [beta_id]


def test_a_replayed_entry_naming_another_tenants_run_is_kept_not_counted_replayed(
    tmp_path: Path, sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The history writer leaves out an event whose run is another tenant's and says so: the
    replay keeps it. Before, it was counted replayed and removed, written nowhere."""
    from sparkwatch.collector.history_process import decode_records
    from sparkwatch.history.writer import HistoryWriter

    events = run_events()
    writer = HistoryWriter(sqlite_url)
    try:
        assert writer.write(decode_records([events[:1]]), ["acme"]) == []
    finally:
        writer.close()
    quarantine = Quarantine(tmp_path / "spool")
    quarantine.add([(events[1], "refused")], ["beta"])
    line = quarantine.path.read_bytes()
    assert main(["quarantine", "replay", "--spool-dir", str(tmp_path / "spool"),
                 "--history-url", sqlite_url]) == 1
    out = capsys.readouterr().out
    assert "still refused, kept: left out: names a run or query of another tenant" in out, out
    assert "replayed 0 of 1" in out
    assert quarantine.path.read_bytes() == line


def test_replay_into_a_file_that_is_no_database_says_so_once_and_keeps_every_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed 'still refused, kept: file is not a database' for each entry, and exit 1."""
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in run_events()[:2]])
    held = quarantine.path.read_bytes()
    history = tmp_path / "history.db"
    history.write_text("not a database\n")
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path),
                                 "--history-url", f"sqlite:///{history}"])
    assert line == ("sparkwatch quarantine: error: the history refuses every write (file is not "
                    "a database): replayed 0 of 2, the rest kept")
    assert quarantine.path.read_bytes() == held
    assert history.read_text() == "not a database\n"


def _started_events(count: int) -> list[dict[str, Any]]:
    """``count`` readable events, each the start of a run of its own (one query_runs row)."""
    return [_started() for _ in range(count)]


def _started() -> dict[str, Any]:
    ids = fresh_ids()
    return run_events(query_id=ids["query_id"], run_id=ids["run_id"], terminated=False)[0]


def spool_and_history(tmp_path: Path) -> tuple[Path, str]:
    """An empty spool directory and a migrated SQLite history to replay into."""
    spool = tmp_path / "spool"
    spool.mkdir()
    history = f"sqlite:///{tmp_path / 'history.db'}"
    migrate.upgrade(history)
    return spool, history


def run_ids_written(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return set(conn.scalars(sa.text("select run_id from query_runs")))
    finally:
        engine.dispose()


def _cli_process(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sparkwatch.cli.main", "quarantine", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def _replay_held_at_its_write(spool: Path, pg_url: str) -> Iterator[subprocess.Popen[str]]:
    """A replay started while a transaction locks query_runs, yielded once it waits on its
    write; the lock is let go when the block ends."""
    database = sa.engine.make_url(pg_url).database
    blocker = sa.create_engine(pg_url)
    try:
        with blocker.connect() as conn:
            conn.execute(sa.text("lock table query_runs in access exclusive mode"))
            replay = _cli_process("replay", "--spool-dir", str(spool), "--history-url", pg_url)
            wait_for(lambda: count_rows(
                pg_url, "select count(*) from pg_stat_activity where datname = :d "
                "and wait_event_type = 'Lock'", d=database) > 0, 60,
                "the replay to wait on its write")
            yield replay
            conn.rollback()
    finally:
        blocker.dispose()


def test_a_replay_stopped_by_sigterm_says_what_it_replayed_and_keeps_the_rest(
    tmp_path: Path, pg_url: str
) -> None:
    """It exited 143 without a word: what had been written and what was kept was left to guess.
    Stopped while a write waits (a transaction locks query_runs), it says how many it replayed;
    exactly those left the quarantine and are in the history."""
    migrate.upgrade(pg_url)
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in _started_events(150)])
    with _replay_held_at_its_write(tmp_path, pg_url) as replay:
        replay.send_signal(signal.SIGTERM)
    out, err = replay.communicate(timeout=120)
    assert replay.returncode == 143, err
    match = re.fullmatch(r"stopped: replayed (\d+) of 150, the rest kept\n", out)
    assert match is not None, (out, err)
    replayed = int(match[1])
    assert len(quarantine.entries()) == 150 - replayed
    assert len(run_ids_written(pg_url)) == replayed
    assert "Traceback" not in err


def test_a_drop_made_while_a_replay_runs_is_never_written_by_that_replay(
    tmp_path: Path, pg_url: str
) -> None:
    """The replay read the quarantine once, without its lock: a drop made meanwhile said
    "dropped 1", exit 0, and the replay then wrote the dropped event all the same. Here the
    replay is held mid-write (a transaction locks query_runs) while the drop runs: either the
    drop waits for it and says the entry is no longer there (it was replayed), or it drops it
    and the replay skips it; what the drop reports dropped is never in the history. An event
    the collector quarantines meanwhile stays quarantined."""
    migrate.upgrade(pg_url)
    events = _started_events(150)  # the dropped one in the replay's second batch
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in events])
    entries = quarantine.entries()
    victim = entries[-1]
    victim_run = events[-1]["payload"]["runId"]
    with _replay_held_at_its_write(tmp_path, pg_url) as replay:
        drop = _cli_process("drop", "--spool-dir", str(tmp_path), victim.id)
        # The collector quarantining another event meanwhile (it waits for the lock too).
        late = _started()
        adding = threading.Thread(target=quarantine.add, args=([(late, "refused")],))
        adding.start()
    # The lock let go: the replay goes on, the drop and the append with it or after it.
    adding.join(timeout=120)
    replay_out, replay_err = replay.communicate(timeout=120)
    drop_out, drop_err = drop.communicate(timeout=120)
    written = run_ids_written(pg_url)
    if drop.returncode == 0:
        assert drop_out == "dropped 1\n", drop_err
        assert victim_run not in written
        assert replay.returncode == 0, replay_err
        assert replay_out.endswith("replayed 149 of 150 (1 left the quarantine meanwhile: "
                                   "dropped or replayed by another command)\n")
    else:
        assert (drop.returncode, drop_out) == (2, "dropped 0\n")
        assert drop_err == (f"sparkwatch quarantine: error: not in the quarantine: "
                            f"'{victim.id}' (see `sparkwatch quarantine list`)\n")
        assert victim_run in written
        assert (replay.returncode, replay_out) == (0, "replayed 150 of 150\n")
    # Everything else was written once, and left the quarantine.
    assert written | {victim_run} == {e["payload"]["runId"] for e in events}
    # Only the late event is left: appended while the replay ran, not lost by its rewrites.
    assert [e.event for e in quarantine.entries()] == [late]


def test_two_replays_at_once_each_write_an_entry_only_if_the_other_has_not(
    tmp_path: Path, pg_url: str
) -> None:
    """Both counted every entry replayed; now the entries the other wrote first are said to
    have left the quarantine, and the two counts add up to the entries held."""
    migrate.upgrade(pg_url)
    events = _started_events(150)
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in events])
    database = sa.engine.make_url(pg_url).database
    blocker = sa.create_engine(pg_url)
    args = ("replay", "--spool-dir", str(tmp_path), "--history-url", pg_url)
    with blocker.connect() as conn:
        conn.execute(sa.text("lock table query_runs in access exclusive mode"))
        first = _cli_process(*args)
        wait_for(lambda: count_rows(
            pg_url, "select count(*) from pg_stat_activity where datname = :d "
            "and wait_event_type = 'Lock'", d=database) > 0, 60, "the replay to wait on its write")
        second = _cli_process(*args)
        conn.rollback()
    blocker.dispose()
    replayed = 0
    for process in (first, second):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        [line] = out.splitlines()
        replayed += int(line.split()[1])
    assert replayed == 150
    assert run_ids_written(pg_url) == {e["payload"]["runId"] for e in events}
    assert quarantine.entries() == []


@pytest.mark.parametrize("kind", ["missing sqlite file", "empty sqlite file", "empty postgresql"])
def test_replay_into_a_history_with_no_schema_is_refused_and_keeps_every_entry(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    """A mistyped path or an empty database got the schema, every entry, "replayed 2 of 2",
    exit 0, and an empty quarantine: the events lived on only in a stray database."""
    quarantine = Quarantine(tmp_path / "spool")
    quarantine.add([(event, "refused") for event in run_events()[:2]])
    held = quarantine.path.read_bytes()
    typo = tmp_path / "typo.db"
    if kind == "empty postgresql":
        url = request.getfixturevalue("pg_url")
        shown = sa.engine.make_url(url).render_as_string(hide_password=True)
    else:
        if kind == "empty sqlite file":
            typo.touch()
        url = shown = f"sqlite:///{typo}"
    line = _usage_error(capsys, ["quarantine", "replay", "--spool-dir", str(tmp_path / "spool"),
                                 "--history-url", url])
    assert line == (f"sparkwatch quarantine: error: --history-url: {shown} holds no sparkwatch "
                    "history: if it really is the history, run `sparkwatch db upgrade` against "
                    "it first")
    assert quarantine.path.read_bytes() == held
    if kind == "missing sqlite file":
        assert not typo.exists()
    elif kind == "empty sqlite file":
        assert typo.read_bytes() == b""
    else:
        assert count_rows(url, "select count(*) from information_schema.tables "
                          "where table_schema = 'public'") == 0


def test_list_says_how_many_lines_it_could_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Four corrupt lines among five entries printed "5 quarantined events" and nothing else."""
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in _started_events(5)])
    with quarantine.path.open("a") as f:
        f.write('{"id": "torn", "at": 1\n' "not json\n" "[1, 2]\n" '{"id": "x"}\n' "\n")
    assert main(["quarantine", "list", "--spool-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "5 quarantined events"
    assert err == (f"sparkwatch quarantine: 4 lines of {quarantine.path} could not be read "
                   "(torn or corrupt): not listed, and never replayed\n")


def test_replay_says_how_many_lines_it_could_not_read_and_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Replay passed over corrupt lines without a word, as list did."""
    url = f"sqlite:///{tmp_path / 'history.db'}"
    migrate.upgrade(url)
    quarantine = Quarantine(tmp_path)
    quarantine.add([(event, "refused") for event in _started_events(2)])
    with quarantine.path.open("a") as f:
        f.write("not json\n" "[1, 2]\n")
    assert main(["quarantine", "replay", "--spool-dir", str(tmp_path), "--history-url", url]) == 0
    out, err = capsys.readouterr()
    assert out == "replayed 2 of 2\n"
    assert err == (f"sparkwatch quarantine: 2 lines of {quarantine.path} could not be read "
                   "(torn or corrupt): not replayed, kept in the file\n")
    assert quarantine.entries() == [] and quarantine.scan()[1] == 2


def test_drop_in_a_symlinked_quarantine_rewrites_the_target_and_keeps_the_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The link was replaced by a regular file, and the target still held the dropped entry."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    spool = tmp_path / "spool"
    spool.mkdir()
    quarantine, acme_id, beta_id = _two_tenants(elsewhere)
    link = spool / "quarantine.jsonl"
    link.symlink_to(quarantine.path)
    assert main(["quarantine", "drop", "--spool-dir", str(spool), acme_id]) == 0
    assert capsys.readouterr().out == "dropped 1\n"
    assert link.is_symlink()
    assert os.readlink(link) == str(quarantine.path)
    assert [e.id for e in quarantine.entries()] == [beta_id]
    assert sorted(p.name for p in spool.iterdir()) == ["quarantine.jsonl", "quarantine.lock"]


def test_drop_of_thousands_of_unknown_ids_names_ten_and_counts_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """5000 unknown ids made one 39 KB error line."""
    _two_tenants(tmp_path)
    unknown = [f"nosuch{i:04}" for i in range(5000)]
    line = _usage_error(capsys, ["quarantine", "drop", "--spool-dir", str(tmp_path), *unknown])
    shown = ", ".join(repr(i) for i in unknown[:10])
    assert line == (f"sparkwatch quarantine: error: not in the quarantine: {shown} and 4990 more "
                    "(see `sparkwatch quarantine list`)")
