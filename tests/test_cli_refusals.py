"""Values a command took and then lost data with, or traced back on, are refused where the
command starts: one line naming the flag or the variable they came from, exit status 2, nothing
lost (a hostile CLI campaign found each)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sparkwatch.cli.main import main
from sparkwatch.collector.quarantine import Quarantine
from tests.support import run_cli
from tests.test_collector_support import Collector, running

IN_MEMORY = ("sqlite://", "sqlite:///:memory:", "sqlite:///file:h?mode=memory&uri=true")


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert "Traceback" not in err
    [line] = err.splitlines()
    return line


@pytest.mark.parametrize("url", IN_MEMORY)
def test_a_replay_into_an_in_memory_database_is_refused_and_keeps_every_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str,
) -> None:
    """Before, it said "replayed 1 of 1" into a database gone at exit, and dropped the entry."""
    Quarantine(tmp_path).add([({"kind": "progress", "payload": {"id": "q"}}, "refused")],
                             ["acme"])
    line = _error(capsys, "quarantine", "replay", "--spool-dir", str(tmp_path),
                  "--history-url", url)
    assert line.startswith("sparkwatch quarantine: error: --history-url: ")
    assert "is an in-memory database, gone when this command exits" in line
    assert len(Quarantine(tmp_path).entries()) == 1


@pytest.mark.parametrize("url", IN_MEMORY)
def test_a_collector_on_an_in_memory_history_is_refused_naming_the_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    url: str,
) -> None:
    """Before, it reported ready, its jobs failed on missing tables, and every acknowledged
    event was gone at exit."""
    spool = str(tmp_path / "spool")
    line = _error(capsys, "collector", "--no-auth", "--spool-dir", spool, "--history-url", url)
    assert line.startswith("sparkwatch collector: error: --history-url: ")
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_HISTORY_URL", url)
    line = _error(capsys, "collector", "--no-auth", "--spool-dir", spool)
    assert line.startswith("sparkwatch collector: error: SPARKWATCH_COLLECTOR_HISTORY_URL: ")


def test_a_collectors_history_url_is_checked_as_the_db_command_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    spool = str(tmp_path / "spool")
    port = "postgresql+psycopg://postgres@127.0.0.1:99999/h"  # was retried for ever
    assert _error(capsys, "collector", "--no-auth", "--spool-dir", spool, "--history-url",
                  port) == ("sparkwatch collector: error: --history-url: port 99999 is out of "
                            "range 0-65535")
    monkeypatch.setenv("SPARKWATCH_COLLECTOR_HISTORY_URL", " ")  # was the history off, silently
    assert _error(capsys, "collector", "--no-auth", "--spool-dir", spool) == (
        "sparkwatch collector: error: SPARKWATCH_COLLECTOR_HISTORY_URL is empty: give a "
        "database URL, or 'off' to keep only /metrics")



@pytest.mark.parametrize(("url", "problem"), [
    ("postgresql+psycopg_async://postgres:pw@127.0.0.1/h",
     "postgresql+psycopg_async://postgres:***@127.0.0.1/h: postgresql+psycopg_async is an "
     "asyncio driver; the history writes synchronously (use e.g. postgresql+psycopg)"),
    ("sqlite:////no/such/folder/h.db",
     "no folder /no/such/folder for the SQLite file /no/such/folder/h.db (SQLite creates the "
     "file, not its folder)"),
])
def test_a_collector_on_a_history_its_writer_can_never_open_is_refused_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, problem: str,
) -> None:
    """Before, it started and retried its schema upgrade for ever: SQLite "unable to open
    database file", the asyncio driver with "coroutine ... was never awaited" warnings."""
    line = _error(capsys, "collector", "--no-auth", "--spool-dir", str(tmp_path / "spool"),
                  "--history-url", url)
    assert line == f"sparkwatch collector: error: --history-url: {problem}"

@pytest.mark.postgres
def test_a_second_collector_on_a_spool_in_use_is_refused_naming_it(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    spool = tmp_path / "spool"
    with running(Collector(pg_url, spool)):
        line = _error(capsys, "collector", "--no-auth", "--spool-dir", str(spool),
                      "--history-url", pg_url, "--port", "0")
    assert line == (f"sparkwatch collector: error: --spool-dir: spool {spool} is in use by "
                    "another process (each replica needs a spool directory of its own)")


def test_quarantine_lines_whose_time_is_no_time_are_listed_and_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """A hand-edited file: `list` traced back in datetime.fromtimestamp."""
    times = ['"yesterday"', "NaN", "1e400", "-1e18", "1700000000"]
    (tmp_path / "quarantine.jsonl").write_text("".join(
        f'{{"id": "e{i}", "at": {at}, "reason": "r", "event": {{}}}}\n'
        for i, at in enumerate(times)))
    code, out, _ = run_cli(capsys, "quarantine", "list", "--spool-dir", str(tmp_path))
    assert code == 0
    assert [line.split()[:2] for line in out.splitlines()[:-1]] == [
        ["e0", "?"], ["e1", "?"], ["e2", "?"], ["e3", "?"], ["e4", "2023-11-14T22:13:20Z"]]
    assert run_cli(capsys, "quarantine", "drop", "e0", "e2", "--spool-dir", str(tmp_path))[:2] \
        == (0, "dropped 2\n")
    held = [json.loads(line)["id"] for line in (tmp_path / "quarantine.jsonl").open()]
    assert held == ["e1", "e3", "e4"]


@pytest.mark.parametrize("duration", ["inf", "nan", "1e308", "0", "604801"])
def test_a_demo_duration_that_is_no_time_span_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], duration: str,
) -> None:
    """'inf' passed and failed once Spark was up, with a traceback."""
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--duration", duration])
    assert exited.value.code == 2
    assert (f"argument --duration: must be more than 0 and at most 604800 s (a week): "
            f"{duration!r}") in capsys.readouterr().err


def test_an_empty_demo_checkpoint_dir_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """'' was the current directory: the demo wrote its nine checkpoints wherever it ran."""
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--checkpoint-dir", ""])
    assert exited.value.code == 2
    assert "argument --checkpoint-dir: empty: give a directory" in capsys.readouterr().err


@pytest.mark.parametrize("argv, argument", [
    (["state", ""], "CHECKPOINT"),
    (["state", "  "], "CHECKPOINT"),
    (["doctor", "--inspect-state", ""], "--inspect-state"),
])
def test_an_empty_checkpoint_location_is_a_usage_error_before_spark_starts(
    capsys: pytest.CaptureFixture[str], argv: list[str], argument: str,
) -> None:
    """Spark was started (seconds) to say it 'can not create a Path from an empty string'."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert (f"argument {argument}: empty: give a checkpoint's directory or URI"
            in capsys.readouterr().err)


@pytest.mark.parametrize("below, said", [
    ("", "exists and is not a directory"),
    ("x", "cannot make {file}/x: Not a directory"),
])
def test_a_demo_checkpoint_dir_that_cannot_be_a_directory_is_refused_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], below: str, said: str,
) -> None:
    """A file there failed once Spark and the queries were up, with a traceback."""
    file = tmp_path / "a-file"
    file.write_text("")
    given = file / below if below else file
    line = _error(capsys, "demo", "--port", "0", "--history-url", "off",
                  "--checkpoint-dir", str(given))
    assert line.startswith("sparkwatch demo: error: --checkpoint-dir: "), line
    assert said.format(file=file) in line, line


@pytest.mark.parametrize("command", ["doctor", "top"])
def test_a_collector_url_holding_a_user_and_password_is_refused_without_the_password(
    capsys: pytest.CaptureFixture[str], command: str,
) -> None:
    """urllib sends neither: it took them as part of the host, and the error was a DNS one."""
    line = _error(capsys, command, "--collector", "http://reader:s3cret@127.0.0.1:9",
                  *(["--once"] if command == "top" else []))
    assert line == (f"sparkwatch {command}: error: --collector http://reader:***@127.0.0.1:9: a "
                    "user or password in the URL is not sent; give the collector's read token "
                    "as SPARKWATCH_TOKEN")


@pytest.mark.parametrize("argv", [["doctor"], ["doctor", "--inspect-state", "/nowhere"],
                                  ["top", "--once"]])
def test_a_token_flag_with_nothing_to_send_it_to_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
) -> None:
    """Before, the token was ignored and the history database's answer taken for the
    collector's."""
    line = _error(capsys, *argv, "--token", "t0ken", "--url", f"sqlite:///{tmp_path}/h.db")
    assert line.startswith(f"sparkwatch {argv[0]}: error: --token is sent only with --collector")
    assert "t0ken" not in line


def test_a_token_in_the_environment_serves_commands_that_do_not_use_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"sqlite:///{tmp_path}/h.db"
    assert run_cli(capsys, "db", "upgrade", "--url", url)[0] == 0
    monkeypatch.setenv("SPARKWATCH_TOKEN", "t0ken")
    assert run_cli(capsys, "doctor", "--url", url) == (
        0, "nothing recorded yet: no query has a batch in the history\n", "")
