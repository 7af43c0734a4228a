"""`sparkwatch history` against a hostile or broken history: rows that hold terminal escapes, an
exception of whitespace only, NaN in a SQLite history's JSON maps, plan rows of another shape, a
query of thousands of runs; and a reader that leaves early. Every answer is either the data,
shown so that it cannot drive the terminal (and as strict JSON), or one line naming the fault."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.schema import OperatorBatch, OperatorPlan, QueryRun
from tests.support import run_cli
from tests.test_history_support import (
    batch_of,
    engine_for,
    load_sample,
    progress,
    started,
    terminated,
    write,
)

AGG = load_sample("window_agg")
ESCAPES = "\x1b[31mred\x1b[0m\u202eevil\r\nforged: line\x07<b>markup</b>"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _strict_json(text: str) -> Any:
    """``text`` parsed as JSON proper: NaN and Infinity are no JSON (``jq`` refuses them)."""
    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def _one_run(url: str, query_id: str, run_id: str, name: str, exception: str | None,
             error_class: str | None = None) -> None:
    """A run of ``query_id`` with one batch, ended with ``exception``, through the writer."""
    raw = batch_of(AGG, 0, "2026-11-21T09:00:10.000Z", id=query_id, runId=run_id, name=name)
    write(url,
          started(query_id, run_id, name, "2026-11-21T09:00:00.000Z"),
          progress(raw),
          terminated(query_id, run_id, "2026-11-21T09:01:00.000Z", exception, error_class))


@pytest.fixture
def migrated(history_url: str) -> str:
    """A migrated history, once on SQLite and once on PostgreSQL."""
    migrate.upgrade(history_url)
    return history_url


@pytest.mark.parametrize("exception", ["\n", " \t\r\n ", "\u2028"])
def test_a_run_whose_exception_is_only_whitespace_is_listed_without_an_error_cell(
        migrated: str, exception: str, capsys: pytest.CaptureFixture[str]) -> None:
    query_id, run_id = "a1000000-0000-4000-8000-000000000001", "a1000000-run-1"
    _one_run(migrated, query_id, run_id, "blank-error", exception)
    code, out, err = run_cli(capsys, "history", "runs", "blank-error", "--url", migrated)
    assert (code, err) == (0, "")
    [row] = out.splitlines()[1:]
    assert row.split()[0] == run_id
    assert row.endswith("  -")  # the ERROR cell: nothing to show, not an IndexError


def test_names_exceptions_and_metric_keys_cannot_drive_the_terminal(
        migrated: str, capsys: pytest.CaptureFixture[str]) -> None:
    query_id, run_id = "a2000000-0000-4000-8000-000000000002", "a2000000-run-1"
    raw = batch_of(AGG, 0, "2026-11-21T09:00:10.000Z", id=query_id, runId=run_id, name=ESCAPES)
    raw["stateOperators"][0]["operatorName"] = ESCAPES
    raw["stateOperators"][0]["customMetrics"] = {ESCAPES: 7}
    write(migrated, started(query_id, run_id, ESCAPES, "2026-11-21T09:00:00.000Z"),
          progress(raw),
          terminated(query_id, run_id, "2026-11-21T09:01:00.000Z", ESCAPES, ESCAPES))
    for view in (["queries"], ["runs", query_id], ["state", query_id]):
        code, out, err = run_cli(capsys, "history", *view, "--url", migrated)
        assert (code, err) == (0, ""), view
        assert not any(c in out for c in "\x1b\r\x07\u202e"), view
        assert "\\x1b[31mred\\x1b[0m\\u202eevil" in out, view
        assert len(out.splitlines()) == 2, view  # header and one row: no forged line
    code, out, _ = run_cli(capsys, "history", "state", query_id, "--format", "json",
                           "--url", migrated)
    [point] = _strict_json(out)
    assert (point["operator_name"], point["custom_metrics"]) == (ESCAPES, {ESCAPES: 7})


def _nan_history(url: str) -> str:
    """A run whose state row's custom metrics hold NaN and infinities as SQLite keeps them
    (JSON text written by another tool, or by hand: the writer spells them as strings)."""
    query_id, run_id = "a3000000-0000-4000-8000-000000000003", "a3000000-run-1"
    _one_run(url, query_id, run_id, "nan-metrics", None)
    with engine_for(url).begin() as conn:
        conn.exec_driver_sql(
            "UPDATE operator_batches SET custom_metrics = "
            "'{\"x\": NaN, \"y\": Infinity, \"z\": -Infinity, \"w\": 1e999, \"n\": 3}' "
            "WHERE run_id = ?", (run_id,))
    return query_id


def test_state_as_json_is_strict_json_when_a_sqlite_history_holds_nan(
        sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrate.upgrade(sqlite_url)
    query_id = _nan_history(sqlite_url)
    code, out, err = run_cli(capsys, "history", "state", query_id, "--format", "json",
                             "--url", sqlite_url)
    assert (code, err) == (0, "")
    [point] = _strict_json(out)
    # null, as the collector's API writes a non-finite number (one answer for one history).
    assert point["custom_metrics"] == {"x": None, "y": None, "z": None, "w": None, "n": 3}


def _many_runs(url: str, query_id: str, runs: int, details_chars: int = 0) -> None:
    """``runs`` failed runs of one query, the latest last, each with a 64 Ki-character exception
    and (with ``details_chars``) a plan of one operator whose details are that long."""
    rows = [{"run_id": f"{query_id[:8]}-run-{n:05d}", "query_id": query_id, "name": "restarts",
             "app_name": "app", "app_id": "app-1", "spark_version": "4.0.0", "status": "failed",
             "started_at": T0 + timedelta(minutes=n), "last_event_at": T0 + timedelta(minutes=n),
             "exception": f"run {n} failed\n" + "x" * 65_536, "error_class": "STREAM_FAILED",
             "tenant": "default", "batches": 0} for n in range(runs)]
    with engine_for(url).begin() as conn:
        conn.execute(sa.insert(QueryRun), rows)
        if details_chars:
            conn.execute(sa.insert(OperatorPlan), [
                {"run_id": r["run_id"], "operator_index": 0, "query_id": query_id,
                 "read_at": r["started_at"], "batch_id": 0, "source": "plan", "note": None,
                 "operator_name": "stateStoreSave", "kind": "aggregation", "keys": ["k"],
                 "details": {"padding": "p" * details_chars}, "settings": {}}
                for r in rows])


@pytest.fixture(scope="module")
def thousands_of_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A query restarted 3,000 times, each run with a plan of 50 KB: 150 MB of plans."""
    url = f"sqlite:///{tmp_path_factory.mktemp('runs') / 'history.db'}"
    migrate.upgrade(url)
    _many_runs(url, "a4000000-0000-4000-8000-000000000004", 3_000, details_chars=50_000)
    # The latest run has a batch, so that `state` has a point to show under its legend.
    point = {column.name: 1 for column in OperatorBatch.__table__.c}
    point.update(run_id="a4000000-run-02999", query_id="a4000000-0000-4000-8000-000000000004",
                 batch_id=0, operator_index=0, timestamp=T0 + timedelta(days=3),
                 operator_name="stateStoreSave", custom_metrics={})
    with engine_for(url).begin() as conn:
        conn.execute(sa.insert(OperatorBatch), [point])
    yield url


def test_runs_are_a_page_latest_first_with_limit_and_offset(
        thousands_of_runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "history", "runs", "restarts", "--url", thousands_of_runs)
    rows = out.splitlines()[1:]
    assert code == 0
    assert len(rows) == 100  # the default page, as `queries` and `state` have
    assert rows[0].startswith("a4000000-run-02999") and rows[-1].startswith("a4000000-run-02900")
    code, out, _ = run_cli(capsys, "history", "runs", "restarts", "--limit", "2", "--offset",
                           "2998", "--format", "json", "--url", thousands_of_runs)
    assert [r["run_id"] for r in _strict_json(out)] == ["a4000000-run-00001",
                                                        "a4000000-run-00000"]
    code, out, _ = run_cli(capsys, "history", "runs", "restarts", "--offset", "3000",
                           "--url", thousands_of_runs)
    assert (code, out) == (0, "nothing past the first 3000 (--offset): fewer are recorded\n")


def _peak_rss_mib(*argv: str) -> tuple[int, float]:
    """The exit status of ``sparkwatch *argv`` run in a process of its own, and the most memory
    that process held (MiB), as a user's shell would see it."""
    # VmHWM, the process's own peak: getrusage's ru_maxrss keeps the peak of the forked
    # image from before exec (here, pytest's).
    probe = ("import sys\n"
             "from sparkwatch.cli.main import main\n"
             "code = main(sys.argv[1:])\n"
             "sys.stdout.flush()\n"
             "status = open('/proc/self/status').read().splitlines()\n"
             "print(next(s.split()[1] for s in status if s.startswith('VmHWM:')),"
             " file=sys.stderr)\n"
             "sys.exit(code)\n")
    done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                          timeout=120)
    return done.returncode, int(done.stderr.strip().splitlines()[-1]) / 1024


@pytest.mark.parametrize("view", [
    ["operators", "restarts"],
    ["operators", "restarts", "--format", "json"],
    ["state", "restarts"],  # its legend names the operators from the latest plan
])
def test_the_latest_plan_is_read_alone_however_many_runs_have_one(
        thousands_of_runs: str, view: list[str]) -> None:
    code, peak = _peak_rss_mib("history", *view, "--url", thousands_of_runs)
    assert code == 0
    # Every run's plan (150 MB) was read to show the latest one.
    assert peak < 120, f"{peak:.0f} MiB"


def test_an_unknown_run_of_a_query_of_thousands_is_one_line(
        thousands_of_runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "history", "operators", "restarts", "--run", "nope",
                             "--url", thousands_of_runs)
    assert (code, out) == (2, "")
    assert err == ("sparkwatch history: error: --run: no run 'nope' of query "
                   "a4000000-0000-4000-8000-000000000004 (see `sparkwatch history runs "
                   "a4000000-0000-4000-8000-000000000004`)\n")


@pytest.mark.parametrize("details", ["[1, 2]", '"text"', "5"])
def test_plan_rows_whose_json_is_not_a_map_still_show_the_plan(
        sqlite_url: str, details: str, capsys: pytest.CaptureFixture[str]) -> None:
    migrate.upgrade(sqlite_url)
    query_id = "a5000000-0000-4000-8000-000000000005"
    _many_runs(sqlite_url, query_id, 1, details_chars=10)
    with engine_for(sqlite_url).begin() as conn:
        conn.exec_driver_sql("UPDATE operator_plans SET details = ?, settings = ?",
                             (details, details))
    code, out, err = run_cli(capsys, "history", "operators", query_id, "--url", sqlite_url)
    assert (code, err) == (0, "")
    assert out.splitlines()[3].split()[:3] == ["0", "stateStoreSave", "aggregation"]
    code, out, _ = run_cli(capsys, "history", "operators", query_id, "--format", "json",
                           "--url", sqlite_url)
    [plan] = _strict_json(out)
    assert (plan["settings"], plan["operators"][0]["details"]) == ({}, {})


def test_a_reader_that_leaves_after_one_line_ends_it_quietly(thousands_of_runs: str) -> None:
    """`sparkwatch history runs QUERY | head -1`: the rest goes nowhere, and no traceback."""
    # A page of 100 runs with 1,000 characters of exception each: more than a pipe holds.
    argv = [sys.executable, "-m", "sparkwatch", "history", "runs", "restarts", "--format",
            "json", "--url", thousands_of_runs]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"[\n"
        proc.stdout.close()  # as `head -1` does once it has its line
        err = proc.stderr.read()
        code = proc.wait(timeout=60)
    assert (code, err) == (0, b"")
