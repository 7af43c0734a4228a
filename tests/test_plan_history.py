"""Operator identity in the SQL history (SQLite and PostgreSQL): written per run, replaced by a
later read, read back whole; shown by `sparkwatch history operators` and as a legend of
`history state`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sparkwatch.cli.main import main
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.plan.mapping import from_progress
from sparkwatch.plan.model import Source
from tests.doctor_support import events_of, load, plan_of, recorded
from tests.test_history_support import migrated_database


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    for db_url in migrated_database(request):
        load(db_url, ["late_data", "join_no_bounds"])
        yield db_url


def test_plan_round_trips_through_the_history(url: str) -> None:
    data = recorded("join_no_bounds")
    events = events_of(data)
    written = plan_of(data, events)
    with HistoryReader(url) as reader:
        [read] = reader.plans("join_no_bounds")
    assert read.operators == written.operators
    assert (read.run_id, read.source, read.batch_id, read.settings) == (
        written.run_id, Source.PLAN, written.batch_id, written.settings
    )
    assert abs(read.read_at - written.read_at) < 0.001


def test_a_later_read_replaces_a_fallback(sqlite_url: str) -> None:
    from sparkwatch.history import migrate

    migrate.upgrade(sqlite_url)
    data = recorded("late_data")
    events = events_of(data)
    plan = plan_of(data, events)
    writer = HistoryWriter(sqlite_url)
    try:
        writer.write(events)
        writer.write_plans([from_progress(plan.query_id, plan.run_id, ["stateStoreSave"], "busy")])
        writer.write_plans([plan])
    finally:
        writer.close()
    with HistoryReader(sqlite_url) as reader:
        [read] = reader.plans(plan.query_id)
    assert read.source is Source.PLAN and read.note is None
    assert read.operators[0].keys == ("window", "key")


def test_history_operators_table_and_json(url: str, capsys) -> None:
    assert main(["history", "operators", "join_no_bounds", "--url", url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("run ") and "from the plan" in out
    header, row = out.splitlines()[2:4]
    assert header.split()[:6] == ["INDEX", "OPERATOR", "KIND", "KEYS", "MODE", "WATERMARK"]
    assert row.split()[:5] == ["0", "symmetricHashJoin", "stream_stream_join", "[key]", "append"]
    assert main(["history", "operators", "late_data", "--url", url, "--format", "json"]) == 0
    [plan] = json.loads(capsys.readouterr().out)
    op = plan["operators"][0]
    assert (op["kind"], op["keys"], op["watermark_delay_ms"], op["state_store_provider"]) == (
        "aggregation", ["window", "key"], 2000, "hdfs"
    )


def test_history_state_shows_what_each_operator_is(url: str, capsys) -> None:
    assert main(["history", "state", "late_data", "--url", url]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        "operator 0 stateStoreSave: aggregation on [window, key], append, watermark ts 2s, "
        "2 stores, hdfs"
    )
    assert main(["history", "state", "late_data", "--url", url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["operator_index"] == 0  # JSON unchanged
