"""`sparkwatch doctor` on real recorded histories (SQLite and PostgreSQL): each problem query
produces its finding with evidence and a fix, the healthy watermarked query none; the exit status
gates on a severity; JSON output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sparkwatch.cli.main import main
from sparkwatch.doctor.collector_source import load_from_collector
from sparkwatch.history.errors import HistoryUnavailable
from tests.conftest import CANARY_TOKEN
from tests.doctor_support import SCENARIOS, load
from tests.test_history_support import migrated_database

EXPECTED = {
    # scenario: (code, severity, words the evidence must hold, words the fix must hold)
    "agg_no_watermark": (
        "aggregation-without-watermark", "error",
        ["grew from 10 to 60 over batches 0–5", "0 were removed", "no withWatermark()"],
        ["withWatermark(", "F.window("],
    ),
    "dedupe_no_watermark": (
        "dedupe-without-watermark", "error",
        ["grew from 10 to 60 over batches 0–5", "dedupe on [key]"],
        ["dropDuplicatesWithinWatermark(", "withWatermark("],
    ),
    "join_no_bounds": (
        "join-without-time-bounds", "error",
        ["grew from 16 to 96 over batches 0–5", "no join state on the left and right sides"],
        ["withWatermark(", "BETWEEN l.ts AND l.ts + interval"],
    ),
    "late_data": (
        "late-rows-dropped", "error",
        ["12 rows dropped", "batches 2–5", "watermark delay is 2s", "79.0 s behind"],
        ['withWatermark("ts", "2 minutes")'],
    ),
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def history(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, str]]]:
    for url in migrated_database(request):
        yield url, load(url, SCENARIOS)


def doctor(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["doctor", *argv])
    out, err = capsys.readouterr()
    return code, out + err


def report(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, dict]:
    code, out = doctor(capsys, "--url", url, "--format", "json", *argv)
    return code, json.loads(out)


def test_the_recorded_scenarios_are_all_there() -> None:
    assert set(SCENARIOS) == {*EXPECTED, "healthy"}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_each_problem_has_its_finding(history, scenario: str, capsys) -> None:
    url, ids = history
    code, data = report(capsys, url, scenario)
    want_code, severity, evidence, fix = EXPECTED[scenario]
    [finding] = data["findings"]
    assert (finding["code"], finding["severity"]) == (want_code, severity)
    assert (finding["query_id"], finding["operator_index"]) == (ids[scenario], 0)
    text = " ".join(finding["evidence"])
    for words in evidence:
        assert words in text, (words, text)
    for words in fix:
        assert words in finding["fix"], (words, finding["fix"])
    assert finding["batches"] is not None
    assert code == 1


def test_healthy_watermarked_query_has_no_finding(history, capsys) -> None:
    url, ids = history
    code, data = report(capsys, url, "healthy", "--fail-on", "info")
    assert data["findings"] == [] and code == 0
    [checked] = data["checked"]
    assert (checked["query_id"], checked["plan"], checked["batches"]) == (ids["healthy"], "plan", 7)


def test_text_report_of_all_queries(history, capsys) -> None:
    url, _ = history
    code, out = doctor(capsys, "--url", url)
    assert code == 1
    assert out.startswith("checked 5 queries: 4 errors\n")
    assert "  healthy (" in out and ": ok - run " in out
    assert "ERROR   late-rows-dropped: late rows are dropped [late_data, operator 0" in out
    assert "        fix: Wait longer for late rows" in out


@pytest.mark.parametrize(
    ("fail_on", "status"), [("info", 1), ("warning", 1), ("error", 1), ("never", 0)]
)
def test_exit_status_gates_on_the_chosen_severity(history, capsys, fail_on, status) -> None:
    url, _ = history
    code, data = report(capsys, url, "--fail-on", fail_on)
    assert code == status
    assert data["summary"] == {
        "error": 4, "warning": 0, "info": 0, "fail_on": fail_on, "failed": bool(status)
    }


def test_without_a_plan_doctor_still_sees_the_growth(sqlite_url: str, capsys) -> None:
    """Spark Connect or an unreadable plan: the growth is found, the cause is not claimed."""
    from sparkwatch.history import migrate

    migrate.upgrade(sqlite_url)
    load(sqlite_url, ["agg_no_watermark", "healthy"], with_plans=False)
    code, data = report(capsys, sqlite_url, "--fail-on", "error")
    [finding] = data["findings"]
    assert (finding["code"], finding["severity"]) == ("state-growing-without-removals", "warning")
    assert "plan not read" in finding["evidence"][0]
    assert [c["plan"] for c in data["checked"]] == ["none", "none"]
    assert code == 0  # a warning does not fail --fail-on error


def test_errors_are_one_line_with_status_2(history, sqlite_url: str, capsys) -> None:
    url, _ = history
    code, out = doctor(capsys, "--url", url, "no-such-query")
    assert code == 2 and "no query with id or name 'no-such-query'" in out
    code, out = doctor(capsys, "--url", sqlite_url)
    assert code == 2 and "no history database" in out


def test_entry_point_exit_status(history) -> None:
    url, _ = history
    run = subprocess.run(
        [sys.executable, "-m", "sparkwatch.cli.main", "doctor", "--url", url, "late_data"],
        capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert "late-rows-dropped" in run.stdout


@pytest.mark.parametrize(("fail_on", "status"), [("warning", 1), ("never", 0)])
@pytest.mark.parametrize("output", ["text", "json"])
def test_a_reader_that_leaves_early_keeps_the_exit_gate(
        history, fail_on: str, status: int, output: str) -> None:
    """`doctor | head -1` in CI: a reader gone before the report is written (here, before it
    starts) leaves the verdict's exit status, quietly; it was 0 whatever the findings."""
    url, _ = history
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        run = subprocess.run(
            [sys.executable, "-m", "sparkwatch.cli.main", "doctor", "--url", url,
             "--fail-on", fail_on, "--format", output],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60,
        )
    finally:
        os.close(write_end)
    assert (run.returncode, run.stderr) == (status, "")


def one_line_error(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``doctor``'s exit status and its stderr, which must be one line and no traceback."""
    code = main(["doctor", *argv])
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and "Traceback" not in out + err, out + err
    return code, err.strip()


@pytest.mark.parametrize("command", [["doctor"], ["top", "--once"]], ids=["doctor", "top"])
@pytest.mark.parametrize("given", ["env", "flag"])
def test_a_token_no_header_can_carry_is_refused_naming_where_it_came_from_not_it(
        command: list[str], given: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both commands that send --token: http.client's refusal quoted the whole header."""
    token = f"{CANARY_TOKEN}\nx"
    monkeypatch.delenv("SPARKWATCH_TOKEN", raising=False)
    if given == "env":
        monkeypatch.setenv("SPARKWATCH_TOKEN", token)
    flag = ["--token", token] if given == "flag" else []
    code = main([*command, "--collector", "http://127.0.0.1:1", *flag])
    out, err = capsys.readouterr()
    origin = "SPARKWATCH_TOKEN" if given == "env" else "--token"
    assert (code, out, err) == (2, "", f"sparkwatch {command[0]}: error: {origin}=<secret>: "
                                "expected visible ASCII characters only (no spaces, control or "
                                "non-ASCII characters)\n")


@pytest.mark.parametrize("command", [["doctor"], ["top", "--once"]], ids=["doctor", "top"])
def test_a_token_on_the_command_line_is_taken_with_a_warning_to_use_the_variable(
        command: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A command line shows in `ps` to every local user; the collector takes its own tokens only
    from the environment or a file."""
    monkeypatch.delenv("SPARKWATCH_TOKEN", raising=False)
    main([*command, "--collector", "http://127.0.0.1:1", "--token", CANARY_TOKEN])
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"sparkwatch {command[0]}: warning: --token is visible to every local user (ps, /proc); "
        "set SPARKWATCH_TOKEN instead")
    assert CANARY_TOKEN not in err


@pytest.mark.parametrize("command", [["doctor"], ["top", "--once"]], ids=["doctor", "top"])
def test_a_token_from_the_variable_gets_no_warning(
        command: list[str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARKWATCH_TOKEN", CANARY_TOKEN)
    main([*command, "--collector", "http://127.0.0.1:1"])
    assert "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:port"])
def test_a_collector_url_that_does_not_parse_is_one_line_naming_the_option(
        url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = one_line_error(capsys, "--collector", url)
    assert (code, err) == (
        2, "sparkwatch doctor: error: --collector is not a valid URL: expected http://host:port")


def test_a_failed_request_to_the_collector_never_quotes_the_exception() -> None:
    # http.client refuses this header with a ValueError quoting it, token and all.
    with pytest.raises(HistoryUnavailable) as refused:
        load_from_collector("http://127.0.0.1:1", f"{CANARY_TOKEN}\r\nX-Evil: 1", None, 10)
    assert str(refused.value) == (
        "cannot reach the collector at http://127.0.0.1:1: not a valid URL or header")
    with pytest.raises(HistoryUnavailable, match="http://127.0.0.1:1: Connection refused$"):
        load_from_collector("http://127.0.0.1:1", CANARY_TOKEN, None, 10)


@pytest.mark.parametrize("given", ["0", "99999999999999999999999"])
def test_batches_out_of_range_is_a_usage_error_naming_it(
        given: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Past what the database binds it was an OverflowError traceback on SQLite."""
    with pytest.raises(SystemExit) as exited:
        main(["doctor", "--batches", given])
    assert exited.value.code == 2
    assert "argument --batches: must be" in capsys.readouterr().err
