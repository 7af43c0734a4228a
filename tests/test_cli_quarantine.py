"""`sparkwatch quarantine` on the file beside the spool: a rewrite (drop, or a replay that writes
some entries) keeps every other entry exactly as it was, tenant included; a spool directory that
is missing, a file, or unwritable, or a quarantine file that is a directory, is a one-line usage
error naming it (exit 2), and a command that reads or rewrites the quarantine never makes a
spool."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkwatch.cli.main import main
from sparkwatch.collector.quarantine import Quarantine
from tests.test_collector_support import run_events

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
