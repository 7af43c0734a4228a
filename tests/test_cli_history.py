"""`sparkwatch history queries|runs|state` on a populated history, and its errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from sparkwatch.cli.history import parse_time
from sparkwatch.cli.main import main
from sparkwatch.history import migrate
from tests.support import run_cli as run
from tests.test_history_reader import JOIN, NEW_RUN, OLD_RUN, QUERY, populate
from tests.test_history_support import migrated_database


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    for db_url in migrated_database(request):
        populate(db_url)
        yield db_url


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """The last line of stderr of ``sparkwatch *argv`` refused by argparse: exit status 2, nothing
    on stdout and no traceback, as every usage error must be."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(argv))
    out, err = capsys.readouterr()
    assert (exit_info.value.code, out) == (2, "")
    assert "Traceback" not in err
    return err.splitlines()[-1]


def test_queries_table(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "queries", "--url", url)
    header, *rows = out.splitlines()
    assert code == 0
    assert header.split() == [
        "QUERY", "ID", "NAME", "APP", "STATUS", "RUNS", "BATCHES", "LAST", "BATCH", "LAST",
        "PROGRESS",
    ]
    agg = next(r for r in rows if r.startswith(QUERY))
    assert agg.split() == [
        QUERY, "window_agg", "orders-etl", "running", "2", "6", "5", "2026-11-21", "09:15:00Z",
    ]
    # Aligned: every row's STATUS cell starts under the header's.
    column = header.index("STATUS")
    assert all(row[column:].startswith("running") for row in rows)


def test_runs_table(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "runs", "window_agg", "--url", url)
    assert code == 0
    assert out.splitlines() == [
        "RUN ID                                STATUS   STARTED               ENDED"
        "                 BATCHES  FIRST  LAST  ERROR",
        f"{NEW_RUN}  running  2026-11-21 09:09:00Z  -                           3      3     5  -",
        f"{OLD_RUN}  failed   2026-11-21 08:59:00Z  2026-11-21 09:03:00Z        3      0     2"
        "  STREAM_FAILED: boom",
    ]


def test_runs_as_json(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "runs", QUERY[:8], "--format", "json", "--url", url)
    runs = json.loads(out)
    assert code == 0
    assert [(r["run_id"], r["status"], r["batches"]) for r in runs] == [
        (NEW_RUN, "running", 3),
        (OLD_RUN, "failed", 3),
    ]
    assert runs[1]["ended_at"] == "2026-11-21T09:03:00Z"


def test_state_table_shows_the_newest_points(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "state", "window_agg", "--limit", "2", "--url", url)
    assert code == 0
    assert out.splitlines() == [
        "TIME                  BATCH  OPERATOR          ROWS  UPDATED  REMOVED  DROPPED"
        "  MEMORY BYTES  COMMIT MS",
        "2026-11-21 09:14:00Z      4  0 stateStoreSave    50        2        0        0"
        "          1832        139",
        "2026-11-21 09:15:00Z      5  0 stateStoreSave    60        2        0        0"
        "          1832        139",
    ]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_full_page_says_on_stderr_that_there_may_be_more(url: str, fmt: str, capsys) -> None:
    # Two runs: a page of one is full, a page of two is full, a page of three is not.
    for limit, offset, note in [("1", "0", "--offset 1"), ("1", "1", "--offset 2"),
                                ("3", "0", None)]:
        code, out, err = run(capsys, "history", "runs", "window_agg", "--limit", limit,
                             "--offset", offset, "--format", fmt, "--url", url)
        assert code == 0 and (NEW_RUN in out or OLD_RUN in out)
        if note is None:
            assert "there may be more" not in err
        else:
            assert err.splitlines()[-1] == (f"sparkwatch history: note: {limit} rows shown, "
                                            f"the --limit; there may be more ({note})")


def test_state_as_json_since_a_time(url: str, capsys) -> None:
    argv = ["history", "state", JOIN["id"], "--operator", "0", "--since", "2026-11-21T09:38",
            "--format", "json", "--url", url]
    code, out, _ = run(capsys, *argv)
    [point] = json.loads(out)
    assert code == 0
    assert point["operator_name"] == "symmetricHashJoin"
    assert point["num_rows_total"] == 102
    assert point["custom_metrics"] == JOIN["stateOperators"][0]["customMetrics"]


def test_state_with_nothing_in_range_says_so(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "state", "window_agg", "--since", "1h", "--url", url)
    assert (code, out) == (0, "nothing recorded matches --since\n")
    code, out, _ = run(capsys, "history", "state", "window_agg", "--operator", "0", "--until",
                       "2000-01-01", "--url", url)
    assert (code, out) == (0, "nothing recorded matches --operator and --until\n")
    code, out, _ = run(capsys, "history", "state", "window_agg", "--since", "1h", "--offset", "5",
                       "--url", url)
    assert (code, out) == (0, "nothing past the first 5 (--offset): fewer match --since\n")
    code, out, _ = run(capsys, "history", "state", "window_agg", "--since", "1h", "--format",
                       "json", "--url", url)
    assert (code, out) == (0, "[]\n")


def test_a_shared_name_shows_the_latest_query_with_a_note(url: str, capsys) -> None:
    code, out, err = run(capsys, "history", "runs", "dup", "--url", url)
    assert code == 0 and "d0000000-0000-4000-8000-00000000000b" in out
    assert err == ("sparkwatch history: note: name 'dup' matches 2 queries; showing the most "
                   "recently active, d0000000-0000-4000-8000-00000000000b (others: "
                   "d0000000-0000-4000-8000-00000000000a; pass an id to choose)\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "nope"], "no query with id or name 'nope'"),
        (["state", "window_agg", "--operator", "2"], "has no state operator 2"),
    ],
)
def test_lookup_errors_are_one_clear_line(
    url: str, argv: list[str], message: str, capsys
) -> None:
    code, out, err = run(capsys, "history", *argv, "--url", url)
    assert (code, out) == (2, "")
    assert err.startswith("sparkwatch history: error: ")
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["operators", "window_agg", "--run", "nope"],
         f"--run: no run 'nope' of query {QUERY} (see `sparkwatch history runs {QUERY}`)"),
        # A run of another query is no run of this one either.
        (["operators", "window_agg", "--run", JOIN["runId"]],
         f"--run: no run {JOIN['runId']!r} of query {QUERY}"),
        # Cut short: a 10,000-character id was echoed whole.
        (["operators", "window_agg", "--run", "r" * 10_000],
         f"--run: no run '{'r' * 37}...' of query {QUERY} (see"),
        (["state", "window_agg", "--since", "2026-11-21T10:00", "--until", "2026-11-21T09:00"],
         "--since (2026-11-21 10:00:00Z) must be before --until (2026-11-21 09:00:00Z)"),
        (["state", "window_agg", "--since", "2026-11-21T09:00", "--until", "2026-11-21T09:00"],
         "--since (2026-11-21 09:00:00Z) must be before --until (2026-11-21 09:00:00Z)"),
    ],
)
@pytest.mark.parametrize("output", ["table", "json"])
def test_filters_that_can_match_nothing_are_errors_not_an_empty_answer(
    url: str, argv: list[str], error: str, output: str, capsys
) -> None:
    code, out, err = run(capsys, "history", *argv, "--format", output, "--url", url)
    assert (code, out) == (2, "")
    assert err.startswith(f"sparkwatch history: error: {error}")
    assert err.count("\n") == 1


def test_a_run_of_the_query_without_a_plan_is_still_nothing_recorded(url: str, capsys) -> None:
    code, out, _ = run(capsys, "history", "operators", "window_agg", "--run", OLD_RUN,
                       "--url", url)
    assert (code, out) == (
        0, "no operator plan recorded yet (written by the listener once a run has a batch)\n")


@pytest.mark.parametrize(
    ("url_arg", "message"),
    [
        ("postgresql+psycopg://postgres@127.0.0.1:1/x", "cannot connect to postgresql+psycopg://"),
        ("sqlite:///{tmp}/absent.db", "no history database at"),
        ("sqlite:///{tmp}/empty.db", "no sparkwatch history schema: run `sparkwatch db upgrade`"),
        ("nonsense", "not a database URL"),
    ],
)
def test_database_errors_are_one_clear_line(url_arg: str, message: str, tmp_path, capsys) -> None:
    empty = tmp_path / "empty.db"
    migrate.upgrade(f"sqlite:///{empty}")
    migrate.downgrade(f"sqlite:///{empty}", "base")
    code, out, err = run(capsys, "history", "queries", "--url", url_arg.format(tmp=tmp_path))
    assert (code, out) == (2, "")
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("argv", [("history", "queries"), ("history", "runs", "q"),
                                  ("doctor",), ("top", "--once")])
@pytest.mark.parametrize("url", ["sqlite:///{tmp}/absent.db",
                                 "sqlite:///file:{tmp}/absent.db?uri=true",
                                 "sqlite:///file://localhost{tmp}/absent.db?uri=true&mode=rwc"])
def test_reading_a_missing_sqlite_file_in_any_url_form_creates_nothing(
    argv: tuple[str, ...], url: str, tmp_path, capsys
) -> None:
    """A ``file:`` URI was taken for an in-memory database and not checked: SQLite created it."""
    code, out, err = run(capsys, *argv, "--url", url.format(tmp=tmp_path))
    assert (code, out) == (2, "")
    assert f"no history database at {tmp_path / 'absent.db'} " in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_bad_since_is_a_usage_error(capsys) -> None:
    last = usage_error(capsys, "history", "state", "q", "--since", "yesterday")
    assert "not a time: 'yesterday'" in last


def test_since_accepts_relative_and_iso_times() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    assert parse_time("90m", now=lambda: now) == datetime(2026, 11, 21, 10, 30, tzinfo=UTC)
    assert parse_time("2d", now=lambda: now) == datetime(2026, 11, 19, 12, 0, tzinfo=UTC)
    assert parse_time("2026-11-21T09:00") == datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
    assert parse_time("2026-11-21T10:00+01:00") == datetime(2026, 11, 21, 9, 0, tzinfo=UTC)


def test_since_refuses_times_past_the_calendar_in_one_line() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"^out of range: '9999999999d' "):
        parse_time("9999999999d")
    # An amount of over 4300 digits, which int() refuses, is shown cut short.
    with pytest.raises(argparse.ArgumentTypeError, match=r"^not a time: '9{37}\.\.\.' \(use"):
        parse_time("9" * 5000 + "s")


HUGE = "99999999999999999999999"  # past the signed 64-bit integers both databases bind


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["queries", "--limit", HUGE], "argument --limit: must be at most 1000000000000000000"),
        (["queries", "--offset", HUGE], "argument --offset: must be at most 1000000000000000000"),
        (["state", "window_agg", "--limit", HUGE],
         "argument --limit: must be at most 1000000000000000000"),
        (["state", "window_agg", "--offset", HUGE],
         "argument --offset: must be at most 1000000000000000000"),
        (["state", "window_agg", "--operator", HUGE],
         "argument --operator: must be at most 2147483647"),
        (["state", "window_agg", "--operator", "-1"], "argument --operator: must not be negative"),
        (["queries", "--limit", "0"], "argument --limit: must be at least 1"),
        (["queries", "--offset", "1.5"], "argument --offset: not a whole number: '1.5'"),
    ],
)
def test_numbers_out_of_range_are_usage_errors_naming_the_option(
    url: str, argv: list[str], error: str, capsys
) -> None:
    last = usage_error(capsys, "history", *argv, "--url", url)
    assert last == f"sparkwatch history {argv[0]}: error: {error}"


def test_the_largest_page_numbers_reach_the_database(url: str, capsys) -> None:
    # 10**18 rows skipped plus 10**18 shown: state adds the two, still inside 64 bits.
    page = ["--limit", "1000000000000000000", "--offset", "1000000000000000000"]
    past = "nothing past the first 1000000000000000000 (--offset): fewer are recorded\n"
    assert run(capsys, "history", "queries", *page, "--url", url) == (0, past, "")
    assert run(capsys, "history", "state", "window_agg", *page, "--url", url) == (0, past, "")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--since", "99999999999d"),
        ("--since", "10000000w"),
        ("--until", "9999-12-31T23:59:59-05:00"),  # year 10000 once in UTC
        ("--since", "0001-01-01T00:00+01:00"),  # year 0 once in UTC
    ],
)
def test_times_past_the_calendar_are_usage_errors_naming_the_option(
    option: str, value: str, capsys
) -> None:
    assert usage_error(capsys, "history", "state", "window_agg", option, value) == (
        f"sparkwatch history state: error: argument {option}: out of range: {value!r} "
        "(times must fall within the years 1 to 9999)"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "\udcff"],  # what Python makes of the byte 0xff in argv
        ["state", "window_agg\udcff"],
        ["operators", "\udcffwindow_agg"],
    ],
)
def test_a_query_that_is_not_utf8_is_a_usage_error(url: str, argv: list[str], capsys) -> None:
    assert usage_error(capsys, "history", *argv, "--url", url) == (
        f"sparkwatch history {argv[0]}: error: argument QUERY: not UTF-8 text "
        "(query ids, names and run ids are UTF-8)"
    )


def test_a_run_id_that_is_not_utf8_is_a_usage_error(url: str, capsys) -> None:
    last = usage_error(capsys, "history", "operators", "window_agg", "--run", f"{NEW_RUN}\udcff",
                       "--url", url)
    assert last.startswith("sparkwatch history operators: error: argument --run: not UTF-8 text")


def test_installed_command_line_refuses_undecodable_bytes(url: str) -> None:
    code = "import sys; from sparkwatch.cli.main import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-c", code, "history", "runs", b"\xff", "--url", url],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "sparkwatch history runs: error: argument QUERY: not UTF-8 text "
        "(query ids, names and run ids are UTF-8)"
    )
    assert "Traceback" not in result.stderr


def test_installed_command_line_end_to_end(url: str) -> None:
    code = "import sys; from sparkwatch.cli.main import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-c", code, "history", "runs", "window_agg", "--url", url],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert NEW_RUN in result.stdout and OLD_RUN in result.stdout
    assert result.stderr == ""


def test_output_to_a_full_disk_is_one_line_not_a_traceback(url: str) -> None:
    """`> /dev/full` (ENOSPC on every write): said in one line, exit 1."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", "history", "queries",
                               "--url", url], stdout=full, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    assert (done.returncode, done.stderr) == (
        1, "sparkwatch history: error: No space left on device\n")
