"""The History dashboard's rollup-based panels give what the raw rows say, on real PostgreSQL.

A small history (three queries, batches every 20 minutes over three days, known durations and
state sizes) is written by the product's writer and rolled up by the product's job; the committed
panel SQL (macros and variables substituted as Grafana does) must equal the same measure computed
from the raw rows: the exact 50 slowest batches, the daily state growth, the hourly p95.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.history import rollups
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import AppInfo, Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from tests.test_collector_support import fresh_ids, recorded
from tests.test_dashboards_support import dashboard_targets, sql_for_test, variable_queries

pytestmark = [pytest.mark.postgres]

APP = AppInfo("panels-app", "app-panels-1", "4.3.0")
START = datetime(2026, 11, 18, 0, 10, tzinfo=UTC)
END = START + timedelta(days=3)
STEP = timedelta(minutes=20)
BOARD = Path(__file__).parents[1] / "dashboards/generated/grafana/sparkwatch-history.json"


def progress(q: int, query_id: str, run_id: str) -> list[dict[str, Any]]:
    """Batch i of query q: a distinct duration (no ties) and a state that grows and shrinks."""
    source = recorded()["progress"][0]
    out = []
    for i in range(int((END - START) / STEP)):
        p = copy.deepcopy(source)
        at = START + i * STEP + timedelta(seconds=q)
        p.update(id=query_id, runId=run_id, batchId=i, name=f"panel-q{q}",
                 timestamp=at.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                 batchDuration=1000 + (i * 7919 + q * 104729) % 50000 * 3 + q)
        p["stateOperators"][0]["numRowsTotal"] = 1000 * (q + 1) + (i * 37) % 500 + i * (q + 1)
        out.append(p)
    return out


def write_history(url: str) -> sa.Engine:
    """The three queries' batches written to ``url`` by the product's writer and rolled up by its
    job; an engine on it."""
    writer = HistoryWriter(url)
    payloads = [p for q in range(3) for p in progress(q, **fresh_ids())]
    writer.write([parse_envelope(Envelope(EventKind.PROGRESS, APP, END.timestamp(), p))
                  for p in payloads])
    writer.close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        rollups.recompute(conn, END, lookback_seconds=4 * 86400)
    return engine


@pytest.fixture(scope="module")
def history(pg_admin_url: str) -> Any:
    from tests.support import create_database, drop_database

    name = create_database(pg_admin_url)
    url = sa.engine.make_url(pg_admin_url).set(database=name).render_as_string(False)
    engine = write_history(url)
    yield engine
    engine.dispose()
    drop_database(pg_admin_url, name)


def panel(conn: sa.Connection, title: str) -> list[Any]:
    """The committed panel's rows over [START, END] with every variable at All."""
    board = json.loads(BOARD.read_text())
    chosen: dict[str, list[str]] = {}
    for name, query in variable_queries(board):
        chosen[name] = [str(r[0]) for r in conn.execute(
            sa.text(sql_for_test(query, chosen, START, END)))]
    (target,) = [t for t in dashboard_targets({"h": board}) if t.panel == title]
    return conn.execute(sa.text(sql_for_test(target.text, chosen, START, END))).all()


def test_slowest_batches_are_exactly_the_raw_top_50(history: sa.Engine) -> None:
    with history.connect() as conn:
        shown = [(r.query, r.batch) for r in panel(conn, "Slowest batches")]
        raw = conn.execute(sa.text(
            "SELECT r.name, b.batch_id FROM batches b JOIN query_runs r ON r.run_id = b.run_id "
            "ORDER BY b.batch_duration_ms DESC LIMIT 50")).all()
    assert shown == [tuple(r) for r in raw]


def test_state_rows_gained_per_day_equal_the_raw_rows(history: sa.Engine) -> None:
    raw_sql = """
SELECT day, metric, last_rows - coalesce(lag(last_rows) OVER (PARTITION BY metric ORDER BY day),
                                        first_rows)
FROM (SELECT date_trunc('day', ob.timestamp) AS day,
             r.name || ' ' || ob.operator_name || ' #' || ob.operator_index AS metric,
             (array_agg(ob.num_rows_total ORDER BY ob.timestamp DESC))[1] AS last_rows,
             (array_agg(ob.num_rows_total ORDER BY ob.timestamp))[1] AS first_rows
      FROM operator_batches ob JOIN query_runs r ON r.run_id = ob.run_id GROUP BY 1, 2) d"""
    with history.connect() as conn:
        shown = {(r.time, r.metric): r[2] for r in panel(
            conn, "State rows gained per day, per operator")}
        raw = {(r[0], r[1]): r[2] for r in conn.execute(sa.text(raw_sql))}
    assert shown == raw
    assert len({day for day, _ in raw}) == 3 and len({m for _, m in raw}) >= 3


def test_hourly_p95_equals_percentile_cont_of_the_raw_batches(history: sa.Engine) -> None:
    raw_sql = """
SELECT date_trunc('hour', b.timestamp), r.name,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY b.batch_duration_ms) / 1000.0,
       max(b.batch_duration_ms) / 1000.0
FROM batches b JOIN query_runs r ON r.run_id = b.run_id GROUP BY 1, 2"""
    with history.connect() as conn:
        shown = {(r.time, r.metric): (r.p95, r.max)
                 for r in panel(conn, "Batch duration per hour (p95 and max)")}
        raw = {(r[0], r[1]): (r[2], r[3]) for r in conn.execute(sa.text(raw_sql))}
    assert shown.keys() == raw.keys()
    for key, (p95, top) in raw.items():
        assert shown[key] == (pytest.approx(p95), pytest.approx(top)), key
