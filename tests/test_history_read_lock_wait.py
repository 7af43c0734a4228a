"""A command's read of a PostgreSQL history behind another session's lock (a migration's ALTER
TABLE, a partition being created, an explicit LOCK TABLE): it waits a bounded time for the lock,
then says so in one line and exits 2. It waited in silence for as long as the lock was held;
SQLite's readers already gave up after its busy timeout."""

from __future__ import annotations

import pytest

from sparkwatch.cli.main import main
from sparkwatch.history import migrate
from sparkwatch.history.reader import HistoryReader
from tests.support import session_holding

pytestmark = pytest.mark.postgres

HELD = "LOCK TABLE query_runs IN ACCESS EXCLUSIVE MODE"


@pytest.fixture()
def history(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    migrate.upgrade(pg_url)
    # A second here; a command waits READ_LOCK_SECONDS (30 s).
    # raising=False: where an older sparkwatch has no bound, the test waits for good instead.
    for module in ("sparkwatch.history.engine", "sparkwatch.history.reader",
                   "sparkwatch.doctor.history_source"):
        monkeypatch.setattr(f"{module}.READ_LOCK_SECONDS", 1.0, raising=False)
    return pg_url


@pytest.mark.timeout(60)  # the old reads waited until the lock was let go: for good here
@pytest.mark.parametrize("argv", [["history", "queries"], ["doctor"]])
def test_a_read_behind_a_held_lock_gives_up_in_one_line(
        history: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with session_holding(history, HELD):
        code = main([*argv, "--url", history])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    [line] = err.splitlines()
    assert line.endswith(": waited 1 s for a lock another session holds on the history's "
                         "tables (a migration, a partition being created?); nothing was "
                         "changed: try again once it is done"), line


def test_a_read_with_no_lock_held_answers_as_before(
        history: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "queries", "--url", history]) == 0
    assert capsys.readouterr().out == "nothing recorded yet\n"


def test_the_servers_reads_keep_their_own_bounds(history: str) -> None:
    """The collector's and the console's readers set statement_timeout and lock_timeout from
    their settings; the command's lock bound does not replace them."""
    with HistoryReader(history, read_bounds=(7.0, 3.0)) as reader, \
            reader._connection() as conn:
        shown = conn.exec_driver_sql("SHOW lock_timeout").scalar_one()
    assert shown == "3s"
