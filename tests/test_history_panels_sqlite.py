"""The History (SQLite) dashboard, for the embedded default history, gives what the raw rows say.

The same small history as tests/test_history_panels.py (three queries, batches every 20 minutes
over three days, real progress JSON with known durations and state sizes) written by the product's
HistoryWriter into a SQLite file and rolled up by the product's job. Every committed panel query
and variable is run as frser-sqlite-datasource runs it (Grafana's ``$__from``/``$__to`` and
``${var:sqlstring}`` substituted, the text handed to SQLite as is, ``timeColumns`` read as epoch
seconds) and must equal the same measure computed from the raw rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.dashboards.docs import panels_in_order
from tests.test_dashboards_support import sqlite_for_test, variable_queries
from tests.test_history_panels import APP, END, START, write_history

BOARD = Path(__file__).parents[1] / "dashboards/generated/grafana/sparkwatch-history-sqlite.json"
NAMES = ["panel-q0", "panel-q1", "panel-q2"]
OPERATOR = "stateStoreSave"


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[dict[str, Any]]


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("history-sqlite") / "sparkwatch.db"
    write_history(f"sqlite:///{path}").dispose()
    yield path


def board() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(BOARD.read_text())
    return data


def readonly(path: Path) -> sqlite3.Connection:
    # The plugin opens the file itself; read-only is all it needs.
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def variables(conn: sqlite3.Connection, start: datetime, end: datetime) -> dict[str, list[str]]:
    """Each variable at *All*: every value its own query returned (in declaration order)."""
    chosen: dict[str, list[str]] = {}
    for name, query in variable_queries(board()):
        chosen[name] = [str(r[0]) for r in conn.execute(sqlite_for_test(query, chosen, start, end))]
    return chosen


def run(conn: sqlite3.Connection, target: dict[str, Any], start: datetime, end: datetime,
        chosen: dict[str, list[str]]) -> Result:
    cursor = conn.execute(sqlite_for_test(target["rawQueryText"], chosen, start, end))
    columns = [c[0] for c in cursor.description]
    rows = []
    for values in cursor.fetchall():
        row = dict(zip(columns, values, strict=True))
        for name in target["timeColumns"]:
            # As the plugin reads a time column: a number is epoch seconds; NULL stays NULL.
            value = row[name]
            assert value is None or isinstance(value, int | float), (name, value)
            row[name] = None if value is None else datetime.fromtimestamp(value, tz=UTC)
        rows.append(row)
    return Result(columns, rows)


def panel(path: Path, title: str, start: datetime = START, end: datetime = END) -> Result:
    with readonly(path) as conn:
        chosen = variables(conn, start, end)
        (panel_json,) = [p for _, p in panels_in_order(board()) if p["title"] == title]
        (target,) = panel_json["targets"]
        return run(conn, target, start, end, chosen)


def raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with readonly(path) as conn:
        return conn.execute(sql).fetchall()


def stored(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def day_of(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def test_every_panel_and_variable_runs_on_sqlite_and_the_variables_list_the_history(
    history: Path,
) -> None:
    with readonly(history) as conn:
        chosen = variables(conn, START, END)
        assert chosen == {"app": [APP.name], "query": NAMES, "operator": [OPERATOR]}
        counts = {}
        for _, p in panels_in_order(board()):
            for target in p["targets"]:
                assert target["datasource"]["type"] == "frser-sqlite-datasource"
                fmt = target["queryType"]
                if fmt == "time series":
                    assert target["timeColumns"] == ["time"]
                counts[p["title"]] = len(run(conn, target, START, END, chosen).rows)
    assert len(counts) == 9
    # No collector wrote this history: nothing stalled. Every other panel has rows.
    assert counts.pop("Stalls detected by the collector") == 0
    assert all(counts.values()), counts


def test_slowest_batches_are_exactly_the_raw_top_50(history: Path) -> None:
    shown = panel(history, "Slowest batches").rows
    top = raw(history, """
SELECT b.timestamp, r.name, b.batch_id, b.batch_duration_ms / 1000.0, b.add_batch_ms / 1000.0
FROM batches b JOIN query_runs r ON r.run_id = b.run_id
ORDER BY b.batch_duration_ms DESC LIMIT 50""")
    assert [(r["time"], r["query"], r["batch"], r["duration"], r["addBatch"]) for r in shown] == [
        (stored(t), name, batch, duration, add) for t, name, batch, duration, add in top
    ]


def state_rows_totals(history: Path) -> list[tuple[Any, ...]]:
    """(timestamp, "<query> <operator> #<index>", numRowsTotal) of every raw operator row, in
    time order: the series the state rows panels show."""
    return raw(history, """
SELECT ob.timestamp, r.name || ' ' || ob.operator_name || ' #' || ob.operator_index,
       ob.num_rows_total
FROM operator_batches ob JOIN query_runs r ON r.run_id = ob.run_id ORDER BY ob.timestamp""")


def test_state_rows_per_day_equal_the_raw_daily_maximum(history: Path) -> None:
    shown = {(r["time"], r["metric"]): r["rows"]
             for r in panel(history, "State rows per day, per operator (max)").rows}
    rows = state_rows_totals(history)
    expected: dict[tuple[datetime, str], int] = {}
    for at, metric, total in rows:
        key = (day_of(stored(at)), metric)
        expected[key] = max(expected.get(key, total), total)
    assert shown == expected
    assert len({day for day, _ in expected}) == 3 and len({m for _, m in expected}) == 3


def test_state_rows_gained_per_day_equal_the_raw_rows(history: Path) -> None:
    shown = {(r["time"], r["metric"]): r["rows gained"]
             for r in panel(history, "State rows gained per day, per operator").rows}
    rows = state_rows_totals(history)
    days: dict[str, dict[datetime, list[int]]] = defaultdict(lambda: defaultdict(list))
    for at, metric, total in rows:
        days[metric][day_of(stored(at))].append(total)
    expected = {}
    for metric, by_day in days.items():
        previous = None
        for day in sorted(by_day):
            totals = by_day[day]
            expected[(day, metric)] = totals[-1] - (totals[0] if previous is None else previous)
            previous = totals[-1]
    assert shown == expected


def percentile_cont(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def test_hourly_p95_and_max_equal_the_raw_batches(history: Path) -> None:
    shown = {(r["time"], r["metric"]): (r["p95"], r["max"])
             for r in panel(history, "Batch duration per hour (p95 and max)").rows}
    hours: dict[tuple[datetime, str], list[int]] = defaultdict(list)
    for at, name, duration in raw(history, """
SELECT b.timestamp, r.name, b.batch_duration_ms
FROM batches b JOIN query_runs r ON r.run_id = b.run_id"""):
        hours[(stored(at).replace(minute=0, second=0, microsecond=0), name)].append(duration)
    assert shown.keys() == hours.keys()
    for key, durations in hours.items():
        expected = (percentile_cont(durations, 0.95) / 1000, max(durations) / 1000)
        assert shown[key] == (pytest.approx(expected[0]), pytest.approx(expected[1])), key


def test_runs_table_and_runs_per_day_show_every_run(history: Path) -> None:
    runs = panel(history, "Runs and restarts, with their exceptions").rows
    expected = raw(history, "SELECT name, status, last_event_at, run_id FROM query_runs")
    assert sorted((r["query"], r["status"], r["started"], r["run id"]) for r in runs) == sorted(
        (name, status, stored(last), run_id) for name, status, last, run_id in expected
    )
    assert {r["app"] for r in runs} == {APP.name} and all(r["ended"] is None for r in runs)
    per_day = panel(history, "Runs started and failed per day").rows
    # The progress-only history has no start events: a run counts on the day of its last event.
    assert sorted((r["time"], r["metric"], r["runs"], r["failed"]) for r in per_day) == sorted(
        (day_of(stored(last)), name, 1, 0) for name, _, last, _ in expected
    )


def test_a_range_inside_a_day_shows_its_day_and_exactly_its_hours(history: Path) -> None:
    start = START.replace(minute=0) + timedelta(days=1, hours=12)
    end = start + timedelta(hours=6)
    daily = panel(history, "State rows per day, per operator (max)", start, end).rows
    assert {r["time"] for r in daily} == {day_of(start)}
    hourly = panel(history, "State rows per hour, per operator", start, end).rows
    assert sorted({r["time"] for r in hourly}) == [start + timedelta(hours=h) for h in range(7)]
    # The hour's maximum from the raw rows of one operator.
    first = raw(history, f"""
SELECT max(ob.num_rows_total) FROM operator_batches ob JOIN query_runs r USING (run_id)
WHERE r.name = 'panel-q1' AND ob.timestamp >= '{start:%Y-%m-%d %H:%M:%S}'
  AND ob.timestamp < '{start + timedelta(hours=1):%Y-%m-%d %H:%M:%S}'""")
    (shown,) = [r["rows"] for r in hourly
                if r["time"] == start and r["metric"] == f"panel-q1 {OPERATOR} #0"]
    assert shown == first[0][0]


def test_a_quote_in_a_chosen_name_is_a_value_not_sql(history: Path) -> None:
    with readonly(history) as conn:
        chosen = {"app": [APP.name], "query": ["panel-q0", "it's'); DROP TABLE batches; --"]}
        (p,) = [p for _, p in panels_in_order(board()) if p["title"] == "Slowest batches"]
        rows = run(conn, p["targets"][0], START, END, {**chosen, "operator": [OPERATOR]}).rows
    assert rows and {r["query"] for r in rows} == {"panel-q0"}
    assert raw(history, "SELECT count(*) FROM batches") == [(648,)]
