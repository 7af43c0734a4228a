"""`sparkwatch db upgrade|downgrade|current`, run through the real entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from sparkwatch.cli.db import user_errors
from sparkwatch.cli.errors import CliError
from sparkwatch.cli.main import main
from sparkwatch.history import migrate
from sparkwatch.history.schema import SCHEMA_REVISION, VERSION_TABLE
from tests.support import run_cli as run
from tests.test_history_support import engine_for
from tests.test_migrations import interrupt_at_index, schema_of

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


def missing_file_urls(tmp_path: Path) -> list[str]:
    """A missing file, as a path and in SQLite's URI forms (percent-encoded, with an authority)."""
    return [f"sqlite:///{tmp_path / 'never.db'}",
            f"sqlite:///file:{tmp_path / 'never.db'}?uri=true",
            f"sqlite:///file://localhost{tmp_path / 'never%20here.db'}?uri=true&mode=rw"]


@pytest.mark.parametrize("revision", ["base", "-1", "0009"])
def test_downgrade_of_a_missing_sqlite_file_refuses_it_and_creates_nothing(
    revision: str, tmp_path: Path, capsys
) -> None:
    """Was "history schema at base" (exit 0) with a new empty file at the mistyped path, or a
    revision error that left the file behind all the same."""
    for url in missing_file_urls(tmp_path):
        code, out, err = run(capsys, "db", "downgrade", "--revision", revision, "--url", url)
        assert (code, out) == (2, ""), url
        assert err.startswith("sparkwatch db: error: no history database at "), err
        assert "create it with `sparkwatch db upgrade`" in err and err.count("\n") == 1
        assert list(tmp_path.iterdir()) == [], url


def test_current_of_a_missing_sqlite_uri_refuses_it_and_creates_nothing(
    tmp_path: Path, capsys
) -> None:
    """A ``file:`` path was taken for an in-memory database and not checked: SQLite created it."""
    for url in missing_file_urls(tmp_path):
        code, _, err = run(capsys, "db", "current", "--url", url)
        assert code == 2 and "no history database at " in err, url
        assert list(tmp_path.iterdir()) == [], url


def test_upgrade_creates_a_new_history_at_a_uri_path_which_the_others_then_use(
    tmp_path: Path, capsys
) -> None:
    url = f"sqlite:///file:{tmp_path / 'h.db'}?uri=true"
    assert run(capsys, "db", "upgrade", "--url", url)[0] == 0
    assert (tmp_path / "h.db").is_file()
    assert run(capsys, "db", "current", "--url", url)[1] == f"{SCHEMA_REVISION} (head)\n"
    assert run(capsys, "db", "downgrade", "--revision", "base", "--url", url)[0] == 0
    assert migrate.current(url) is None


AT_IN_PASSWORD = "postgresql://owner-u7:my@pass-9z@db-host-4k.invalid/hist"
"""'@' in the password, not percent-encoded: SQLAlchemy reads password "my", host
"pass-9z@db-host-4k.invalid", and the driver's "failed to resolve host" showed it."""
AT_REFUSED = ("database URL refused: an '@' follows its credentials and would be read as part of "
              "the host: percent-encode '@' in the password as %40 "
              "(postgresql://USER:MY%40PASS@HOST/DB)")


@pytest.mark.parametrize("action", [("upgrade",), ("downgrade", "--revision", "base"),
                                    ("current",)])
def test_an_at_in_the_password_is_refused_without_any_of_the_url(
    action: tuple[str, ...], capsys, monkeypatch
) -> None:
    code, out, err = run(capsys, "db", *action, "--url", AT_IN_PASSWORD)
    assert (code, out, err) == (2, "", f"sparkwatch db: error: --url: {AT_REFUSED}\n")
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", AT_IN_PASSWORD)
    code, out, err = run(capsys, "db", *action)
    assert (code, err) == (2, f"sparkwatch db: error: SPARKWATCH_HISTORY_URL: {AT_REFUSED}\n")


@pytest.mark.parametrize("url", [
    "postgresql://u:my@pass@h/db",
    "postgresql://:my@pass@h/db",
    "postgresql+psycopg://u:my@pass@h:5432/db?sslmode=require",
    "postgresql://u:p@h:54@32/db",
    "postgresql://u:a/b@c@h/db",
    "postgresql://u:my@pass@[::1]:5432/db",
])
def test_parse_url_refuses_an_at_after_the_credentials(url: str) -> None:
    from sparkwatch.history.engine import parse_url
    from sparkwatch.history.errors import HistoryUrlError

    with pytest.raises(HistoryUrlError) as refused:
        parse_url(url)
    assert str(refused.value) == AT_REFUSED


@pytest.mark.parametrize(("url", "user", "password", "host"), [
    ("postgresql://u:my%40pass@h/db", "u", "my@pass", "h"),
    ("postgresql://user@corp@h/db", "user@corp", None, "h"),  # '@' in a name without password
    ("postgresql://u@h/db?application_name=a@b", "u", None, "h"),
    ("sqlite:///dir@x/h.db", None, None, None),
])
def test_parse_url_keeps_an_at_that_is_not_after_the_credentials(
    url: str, user: str | None, password: str | None, host: str | None
) -> None:
    from sparkwatch.history.engine import parse_url

    parsed = parse_url(url)
    assert (parsed.username, parsed.password, parsed.host) == (user, password, host)


@pytest.mark.postgres
def test_a_percent_encoded_at_in_the_password_works_on_postgresql(pg_url: str, capsys) -> None:
    url = sa.engine.make_url(pg_url)
    encoded = url.set(password="my@pass").render_as_string(hide_password=False)
    assert "my%40pass@" in encoded
    assert run(capsys, "db", "upgrade", "--url", encoded)[0] == 0
    assert migrate.current(pg_url) == SCHEMA_REVISION
    raw = encoded.replace("%40", "@")
    code, _, err = run(capsys, "db", "downgrade", "--revision", "base", "--url", raw)
    assert (code, err) == (2, f"sparkwatch db: error: --url: {AT_REFUSED}\n")
    assert migrate.current(pg_url) == SCHEMA_REVISION


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
        (
            ["db", "upgrade", "--revision", "0042"],
            "--revision '0042': Can't locate revision identified by '0042'",
        ),
        (["db", "upgrade", "--revision", ""], "--revision '': no revision given"),
        (["db", "downgrade", "--revision", ""], "--revision '': no revision given"),
        (["db", "downgrade", "--revision", "0005@"], "--revision '0005@': cannot resolve"),
        (
            ["db", "upgrade", "--url", "sqlite://"],
            "sqlite:// is an in-memory database, gone when this command exits: "
            "it cannot hold a history",
        ),
        (
            ["db", "downgrade", "--revision", "base", "--url", "sqlite:///:memory:"],
            "sqlite:///:memory: is an in-memory database",
        ),
        (["db", "current", "--url", "sqlite:////nonexistent/dir/h.db"],
         "no folder /nonexistent/dir for the SQLite file /nonexistent/dir/h.db"),
        (["db", "current", "--url", "sqlite:////proc/h.db"], "no history database at /proc/h.db"),
        # empty: was the default sqlite:///sparkwatch.db, created in the current directory
        (["db", "upgrade", "--url", ""], "--url is empty: give a database URL"),
        (["db", "current", "--url", "postgresql+psycopg://postgres@127.0.0.1/\udcff"],
         "--url is not UTF-8 text"),
        # /proc: a folder in which nothing can be created, were the option taken
        (["db", "upgrade", "--url", "sqlite:////proc/h.db?timeout=soon"],
         "database URL refused: could not convert string to float: 'soon'"),
    ],
)
def test_errors_are_one_clear_line(
    argv: list[str], message: str, sqlite_url: str, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", sqlite_url)
    # An empty database: a downgrade refuses a missing file before it reads --revision.
    Path(sqlite_url.removeprefix("sqlite:///")).touch()
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("sparkwatch db: error: ")
    assert message in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_history_switched_off_in_the_environment_needs_a_url(capsys, monkeypatch) -> None:
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", "off")
    code, _, err = run(capsys, "db", "current")
    assert code == 2
    assert "the history is disabled (SPARKWATCH_HISTORY_URL='off'); pass --url" in err


def set_revision(url: str, revision: str) -> None:
    with engine_for(url).begin() as conn:
        conn.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = :rev"), {"rev": revision})


def test_current_on_a_newer_database_says_to_upgrade_sparkwatch(sqlite_url: str, capsys) -> None:
    migrate.upgrade(sqlite_url)
    set_revision(sqlite_url, "0099")
    code, out, _ = run(capsys, "db", "current", "--url", sqlite_url)
    newer = f"newer than this sparkwatch, whose head is {SCHEMA_REVISION}: upgrade sparkwatch"
    assert (code, out) == (0, f"0099 ({newer})\n")


def test_upgrade_of_a_newer_database_says_to_upgrade_sparkwatch(sqlite_url: str, capsys) -> None:
    migrate.upgrade(sqlite_url)
    set_revision(sqlite_url, "0099")
    code, out, err = run(capsys, "db", "upgrade", "--url", sqlite_url)
    assert (code, out) == (2, "")
    assert err == (
        f"sparkwatch db: error: {sqlite_url} has history schema 0099, newer than this sparkwatch "
        f"(its newest is {SCHEMA_REVISION}): upgrade sparkwatch\n"
    )


def test_upgrade_after_a_conflicting_table_is_dropped_reaches_head(
    sqlite_url: str, capsys
) -> None:
    """The reviewer's case: an upgrade from 0001 fails in migration 0003 and leaves nothing of
    0002."""
    code, _, _ = run(capsys, "db", "upgrade", "--revision", "0001", "--url", sqlite_url)
    assert code == 0
    with engine_for(sqlite_url).begin() as conn:
        conn.execute(sa.text("CREATE TABLE operator_plans (x INTEGER)"))
    code, _, err = run(capsys, "db", "upgrade", "--url", sqlite_url)
    assert (code, err) == (
        2, "sparkwatch db: error: database error: table operator_plans already exists\n")
    assert "job_runs" not in sa.inspect(engine_for(sqlite_url)).get_table_names()
    code, out, _ = run(capsys, "db", "current", "--url", sqlite_url)
    assert (code, out) == (0, f"0001 (head is {SCHEMA_REVISION}: run `sparkwatch db upgrade`)\n")

    with engine_for(sqlite_url).begin() as conn:
        conn.execute(sa.text("DROP TABLE operator_plans"))
    code, out, _ = run(capsys, "db", "upgrade", "--url", sqlite_url)
    assert (code, out) == (0, f"history schema at {SCHEMA_REVISION} (head) in {sqlite_url}\n")
    code, out, _ = run(capsys, "db", "current", "--url", sqlite_url)
    assert (code, out) == (0, f"{SCHEMA_REVISION} (head)\n")


def test_ctrl_c_during_upgrade_exits_130_and_the_next_upgrade_reaches_head(
    sqlite_url: str, capsys, monkeypatch
) -> None:
    interrupt_at_index(monkeypatch, "ix_query_rollups_resolution_bucket_start")  # in 0006
    code, out, _ = run(capsys, "db", "upgrade", "--url", sqlite_url)
    assert (code, out) == (130, "")
    assert schema_of(sqlite_url) == {"tables": {}, "revision": None}

    monkeypatch.undo()
    code, out, _ = run(capsys, "db", "upgrade", "--url", sqlite_url)
    assert (code, out) == (0, f"history schema at {SCHEMA_REVISION} (head) in {sqlite_url}\n")


def test_upgrade_and_downgrade_print_one_line_and_no_alembic_log(sqlite_url: str) -> None:
    """In a process of their own: Alembic logs as it is imported, which in this one is done."""
    def sparkwatch(*argv: str) -> subprocess.CompletedProcess[str]:
        code = "import sys; from sparkwatch.cli.main import main; sys.exit(main())"
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                              text=True, timeout=120, check=False)

    up = sparkwatch("db", "upgrade", "--url", sqlite_url)
    assert (up.returncode, up.stdout, up.stderr) == (
        0, f"history schema at {SCHEMA_REVISION} (head) in {sqlite_url}\n", "")
    down = sparkwatch("db", "downgrade", "--revision", "0009", "--url", sqlite_url)
    assert (down.returncode, down.stdout, down.stderr) == (
        0, f"history schema at 0009 in {sqlite_url}\n", "")


def test_a_value_error_of_this_program_is_not_blamed_on_the_database_url() -> None:
    """Was "database URL refused: invalid literal ...", for any ValueError of any command's body:
    a bug goes on as itself."""
    with pytest.raises(ValueError, match="invalid literal"), user_errors():
        int("not a number")


def test_a_value_error_the_driver_raises_on_the_url_query_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="^database URL refused: could not convert string to "
                                       "float: 'soon'$"), user_errors():
        sa.create_engine(f"sqlite:///{tmp_path / 'h.db'}?timeout=soon")


def test_a_stored_value_the_database_library_cannot_read_is_one_line_naming_the_history() -> None:
    """Was "database URL refused" (any ValueError), then a JSONDecodeError traceback."""
    from sparkwatch.history.columns import json_type

    engine = sa.create_engine("sqlite://")
    table = sa.Table("t", sa.MetaData(), sa.Column("m", json_type()))
    table.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("insert into t values ('{not json')")
    with pytest.raises(CliError, match="^the history holds a value this version cannot read: "
                                       "Expecting property name"), user_errors(), \
            engine.connect() as conn:
        conn.execute(sa.select(table)).all()


def test_a_huge_revision_is_refused_in_one_short_line(sqlite_url: str, capsys) -> None:
    """Was the 100 KB value quoted twice (the option's and the migration's own words)."""
    code, out, err = run(capsys, "db", "stamp", "--revision", "x" * 100_000, "--url", sqlite_url)
    assert (code, out) == (2, "") and len(err) < 500, err[:600]
    assert err.startswith("sparkwatch db: error: --revision 'xxx")
