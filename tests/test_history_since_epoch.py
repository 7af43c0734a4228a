"""`sparkwatch history state --since/--until` take Unix seconds too, as Prometheus' HTTP API takes
its start and end: a bare number, fractions allowed, beside 2h, 7d and ISO-8601."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from sparkwatch.cli.history import parse_time
from tests.support import run_cli as run
from tests.test_cli_history import usage_error
from tests.test_history_reader import JOIN, populate
from tests.test_history_support import migrated_database

AT_0938 = "1795253880"  # 2026-11-21T09:38:00Z


@pytest.fixture(scope="module", params=["sqlite"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    for db_url in migrated_database(request):
        populate(db_url)
        yield db_url


@pytest.mark.parametrize(
    ("text", "time"),
    [
        (AT_0938, datetime(2026, 11, 21, 9, 38, tzinfo=UTC)),
        ("1795253880.123456", datetime(2026, 11, 21, 9, 38, 0, 123456, tzinfo=UTC)),
        (" 1795253880.5 ", datetime(2026, 11, 21, 9, 38, 0, 500000, tzinfo=UTC)),
        ("1.79525388e9", datetime(2026, 11, 21, 9, 38, tzinfo=UTC)),
        ("0", datetime(1970, 1, 1, tzinfo=UTC)),
        (".5", datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
        ("1e-999999999", datetime(1970, 1, 1, tzinfo=UTC)),  # a microsecond is the least
        ("-1", datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("253402300799", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("-62135596800", datetime(1, 1, 1, tzinfo=UTC)),
        # What ISO-8601 reads stays ISO-8601 (accepted before numbers were): a basic date.
        ("20261121", datetime(2026, 11, 21, tzinfo=UTC)),
    ],
)
def test_a_bare_number_is_unix_seconds(text: str, time: datetime) -> None:
    assert parse_time(text) == time


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("1e300", "out of range: '1e300' (times must fall within the years 1 to 9999)"),
        ("253402300800", "out of range: '253402300800' (times must fall within the years 1 to "
                         "9999)"),
        ("-62135596801", "out of range: '-62135596801' (times must fall within the years 1 to "
                         "9999)"),
        pytest.param("9" * 5000, f"out of range: '{'9' * 37}...' (times must fall within the "
                     "years 1 to 9999)", id="5000-digits"),
        ("1e999999999", "out of range: '1e999999999' (times must fall within the years 1 to "
                        "9999)"),
        ("nan", "not a time: 'nan' (use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds "
                "1795253880)"),
        ("-inf", "not a time: '-inf' (use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds "
                 "1795253880)"),
        ("1_000", "not a time: '1_000' (use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds "
                  "1795253880)"),
        ("0x10", "not a time: '0x10' (use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds "
                 "1795253880)"),
    ],
)
def test_numbers_that_are_no_time_are_refused_in_one_line(text: str, error: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        parse_time(text)
    assert str(refused.value) == error


def test_state_since_unix_seconds_is_the_same_as_since_the_iso_time(url: str, capsys) -> None:
    argv = ["history", "state", JOIN["id"], "--operator", "0", "--format", "json", "--url", url]
    code, by_seconds, _ = run(capsys, *argv, "--since", AT_0938)
    assert code == 0
    assert by_seconds == run(capsys, *argv, "--since", "2026-11-21T09:38")[1]
    [point] = json.loads(by_seconds)
    assert point["num_rows_total"] == 102
    # The point is at 09:38:06, and --until is exclusive: a microsecond past it holds it.
    assert run(capsys, *argv, "--until", "1795253886.000001")[1] == by_seconds
    assert run(capsys, *argv, "--since", "1795253885.5", "--until", "1795253886") == (
        0, "[]\n", "")


@pytest.mark.parametrize("option", ["--since", "--until"])
@pytest.mark.parametrize(("value", "error"), [
    ("1e300", "out of range: '1e300' (times must fall within the years 1 to 9999)"),
    ("nan", "not a time: 'nan' (use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds "
            "1795253880)"),
    ("inf", "not a time: 'inf' (use e.g. 2h, 30m, 7d, 2026-11-21T09:00 or Unix seconds "
            "1795253880)"),
])
def test_a_number_that_is_no_time_is_a_usage_error_naming_the_option(
    url: str, option: str, value: str, error: str, capsys
) -> None:
    assert usage_error(capsys, "history", "state", JOIN["id"], option, value, "--url", url) == (
        f"sparkwatch history state: error: argument {option}: {error}")


def test_help_names_unix_seconds(capsys) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "history", "state", "--help")
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--since SINCE e.g. 2h, 30m, 7d, an ISO-8601 time or Unix seconds" in help_text
