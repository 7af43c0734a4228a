"""`sparkwatch db upgrade|downgrade|current`, run through the real entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkwatch.cli.main import main
from sparkwatch.history import migrate
from sparkwatch.history.schema import SCHEMA_REVISION
from tests.support import run_cli as run

UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/x"


def test_upgrade_creates_the_schema_and_says_so(sqlite_url: str, capsys) -> None:
    code, out, _ = run(capsys, "db", "upgrade", "--url", sqlite_url)
    assert code == 0
    assert out == f"history schema at {SCHEMA_REVISION} (head) in {sqlite_url}\n"
    assert migrate.current(sqlite_url) == SCHEMA_REVISION


def test_current_reports_the_revision(sqlite_url: str, capsys) -> None:
    migrate.upgrade(sqlite_url)
    code, out, _ = run(capsys, "db", "current", "--url", sqlite_url)
    assert (code, out) == (0, f"{SCHEMA_REVISION} (head)\n")


def test_downgrade_to_base_removes_the_schema(sqlite_url: str, capsys) -> None:
    migrate.upgrade(sqlite_url)
    code, out, _ = run(capsys, "db", "downgrade", "--revision", "base", "--url", sqlite_url)
    assert (code, out) == (0, f"history schema at base (no history tables) in {sqlite_url}\n")
    code, out, _ = run(capsys, "db", "current", "--url", sqlite_url)
    assert (code, out) == (0, "none (no history schema: run `sparkwatch db upgrade`)\n")


def test_downgrade_needs_a_revision(sqlite_url: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["db", "downgrade", "--url", sqlite_url])
    assert exit_info.value.code == 2
    assert "--revision" in capsys.readouterr().err


def test_db_commands_on_postgresql(pg_url: str, capsys) -> None:
    assert run(capsys, "db", "upgrade", "--url", pg_url)[0] == 0
    assert run(capsys, "db", "current", "--url", pg_url)[1] == f"{SCHEMA_REVISION} (head)\n"
    assert run(capsys, "db", "downgrade", "--revision", "base", "--url", pg_url)[0] == 0
    assert migrate.current(pg_url) is None


def test_url_comes_from_the_environment(sqlite_url: str, capsys, monkeypatch) -> None:
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", sqlite_url)
    assert run(capsys, "db", "upgrade")[0] == 0
    assert migrate.current(sqlite_url) == SCHEMA_REVISION


def test_url_defaults_to_sparkwatch_db_here(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("SPARKWATCH_HISTORY_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "db", "upgrade")
    expected = f"history schema at {SCHEMA_REVISION} (head) in sqlite:///sparkwatch.db\n"
    assert (code, out) == (0, expected)
    assert (tmp_path / "sparkwatch.db").is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["db", "upgrade", "--url", UNREACHABLE],
            "cannot connect to postgresql+psycopg://postgres@127.0.0.1:1/x: connection failed:",
        ),
        (["db", "current", "--url", "not a url"], "not a database URL: <unparseable URL>"),
        (["db", "upgrade", "--url", "mysql://u@h/d"], "unsupported database 'mysql'"),
        (["db", "upgrade", "--revision", "0042"], "Can't locate revision identified by '0042'"),
        (["db", "current", "--url", "sqlite:////nonexistent/dir/h.db"], "no history database at"),
    ],
)
def test_errors_are_one_clear_line(
    argv: list[str], message: str, sqlite_url: str, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", sqlite_url)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("sparkwatch db: error: ")
    assert message in err
    assert err.count("\n") == 1


def test_history_switched_off_in_the_environment_needs_a_url(capsys, monkeypatch) -> None:
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", "off")
    code, _, err = run(capsys, "db", "current")
    assert code == 2
    assert "the history is disabled (SPARKWATCH_HISTORY_URL='off'); pass --url" in err
