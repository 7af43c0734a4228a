"""`sparkwatch doctor` over a history holding names far past the listener's 256 characters (a
hand-edited or old history): the text report shows each name's start, escaped and cut with an
ellipsis, in lines of bounded length; the JSON report keeps every name whole."""

from __future__ import annotations

import json

import pytest

from sparkwatch.history import migrate
from tests.support import run_cli
from tests.test_history_support import batch_of, engine_for, load_sample, progress, started, write

QUERY, RUN = "d1000000-0000-4000-8000-000000000001", "d1000000-run-1"
# Control characters in the kept start: shown as their escapes, never acted on.
QUERY_NAME = "orders\x1b[2J-" + "q" * 100_000
OPERATOR_NAME = "symmetricHashJoin\r" + "o" * 100_000
LONGEST_LINE = 1000


@pytest.fixture
def history(sqlite_url: str) -> str:
    """A RocksDB join's run of three batches, its query and its operator then renamed by hand,
    and late rows dropped in each batch (a finding naming both)."""
    migrate.upgrade(sqlite_url)
    join = load_sample("stream_stream_join_rocksdb")
    batches = [progress(batch_of(join, b, f"2026-11-21T09:0{b}:00.000Z", id=QUERY, runId=RUN))
               for b in range(3)]
    write(sqlite_url, started(QUERY, RUN, "join", "2026-11-21T08:59:00.000Z"), *batches)
    with engine_for(sqlite_url).begin() as conn:
        conn.exec_driver_sql("UPDATE query_runs SET name = ?", (QUERY_NAME,))
        conn.exec_driver_sql("UPDATE operator_batches SET operator_name = ?, "
                             "num_rows_dropped_by_watermark = 4", (OPERATOR_NAME,))
    return sqlite_url


def test_text_report_cuts_a_100_kb_query_and_operator_name_to_its_escaped_start(
        history: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "doctor", "--url", history, "--format", "text")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert max(map(len, lines)) < LONGEST_LINE
    assert "\x1b" not in out and "\r" not in out
    shown_query = "orders\\x1b[2J-" + "q" * 85 + "…"  # 100 columns with its ellipsis
    shown_operator = "symmetricHashJoin\\x0d" + "o" * 78 + "…"
    assert lines[1] == (f"  {shown_query} (d1000000): 1 finding - run d1000000, batches 0–2, "
                        "no plan recorded")
    assert lines[3] == (f"ERROR   late-rows-dropped: late rows are dropped [{shown_query}, "
                        f"operator 0 {shown_operator}, batches 0–2]")
    # The evidence naming the operator names it as cut too, and says what follows the name (a
    # kind told by the name: renamed, it is no known one).
    assert lines[4] == f"        - operator 0 {shown_operator}: unknown (plan not read)"


def test_json_report_keeps_a_100_kb_name_whole(
        history: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "doctor", "--url", history, "--format", "json")
    assert (code, err) == (1, "")
    report = json.loads(out)
    assert report["checked"][0]["name"] == QUERY_NAME
    [late] = report["findings"]
    assert (late["query_name"], late["operator"]) == (QUERY_NAME, OPERATOR_NAME)
