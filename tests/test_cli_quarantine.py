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
