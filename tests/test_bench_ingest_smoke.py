"""The ingest benchmark keeps working: a tiny real run (a real collector process on PostgreSQL and
on SQLite, a real Pushgateway, the raw database floor) whose counts must be exact.

Speed is not checked here (targets live in ``python -m bench ingest`` and docs/benchmarks.md);
only that every event is accepted and written exactly once and the table is produced.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bench.fleet import Fleet
from bench.ingest import profile as ingest_profile
from bench.ingest import pushgw as ingest_pushgw
from bench.ingest.bodies import lane_events
from bench.record import markers
from tests.bench_support import recorded_run
from tests.conftest import unavailable

EVENTS, QUERIES, GATEWAY_EVENTS = 240, 20, 40
TABLES = ("query_runs", "batches", "operator_batches", "source_batches", "sink_batches")


@pytest.fixture(scope="module")
def smoke(pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if ingest_pushgw.available() is not None:
        unavailable(str(ingest_pushgw.available()))
    tmp = tmp_path_factory.mktemp("ingest")
    admin = sa.engine.make_url(pg_admin_url).render_as_string(hide_password=False)
    result = recorded_run(["ingest", "--quick", "--events", str(EVENTS), "--queries", str(QUERIES),
                           "--batch", "50", "--clients", "2", "--pushgateway-events",
                           str(GATEWAY_EVENTS), "--pushgateway-seconds", "20", "--per-tx", "100",
                           "--pg-admin-url", admin], tmp)
    return {**result, "runs": {r["path"]: r for r in result["raw"]}}


@pytest.mark.timeout(120)  # a hang guard; the run takes ~15-30 s
def test_every_event_is_accepted_and_written_exactly_once(smoke: dict[str, Any]) -> None:
    runs = smoke["runs"]
    expected = {"query_runs": QUERIES, "batches": EVENTS, "operator_batches": 4 * EVENTS,
                "source_batches": EVENTS, "sink_batches": EVENTS}
    for db in ("PostgreSQL", "SQLite"):
        accepted, written = runs[f"collector → {db}, accepted"], runs[f"collector → {db}, written"]
        assert accepted["events"] == written["events"] == EVENTS, db
        assert accepted["problems"] == [] and written["problems"] == [], db
        assert written["extra"]["counts"] == expected, db
        assert written["seconds"] >= accepted["seconds"] > 0, db
        metrics = written["extra"]["self_metrics"]
        assert metrics["sparkwatch_collector_events_accepted_total"] == EVENTS, db
        assert metrics["sparkwatch_collector_history_events_written_total"] == EVENTS, db
        assert metrics["sparkwatch_collector_events_duplicate_total"] == 0, db
        assert written["cpu_s"] > 0 and written["rss_mib"] > 0, db
    for name in ("floor: PostgreSQL COPY", "floor: SQLite executemany"):
        assert runs[name]["extra"]["counts"] == expected and runs[name]["problems"] == [], name
    assert smoke["code"] == 0


@pytest.mark.timeout(120)
def test_the_gateway_takes_every_push_and_the_table_is_recorded(smoke: dict[str, Any]) -> None:
    runs = smoke["runs"]
    free, default = runs["Pushgateway, consistency check off"], runs["Pushgateway, defaults"]
    assert free["events"] == GATEWAY_EVENTS and free["problems"] == []
    assert 0 < default["events"] <= GATEWAY_EVENTS and default["problems"] == []
    doc = smoke["doc"]
    begin, end = markers("ingest")
    assert doc.count(begin) == 1 and end in doc
    assert "| collector → PostgreSQL, written | 240 |" in doc
    assert "correctness: every event accepted and written exactly once" in doc
    assert "target written/floor ≥ 0.8× on PostgreSQL: " in doc
    assert "target written/floor ≥ 0.8× on SQLite: " in doc


def test_each_client_sends_its_queries_in_order() -> None:
    fleet = Fleet(queries=7)
    lanes = lane_events(fleet, 50, 3)
    assert sorted(i for lane in lanes for i in lane) == list(range(50))
    for lane in lanes:
        assert lane == sorted(lane) and len({i % 7 % 3 for i in lane}) == 1


def test_the_profile_summary_groups_threads_and_leaves_waits_out() -> None:
    raw = "\n".join([
        "thread (1): collector-history;Thread.run (threading.py:982);"
        "HistoryPump._run (collector/pump.py:75);write (sparkwatch/history/writer.py:61) 7",
        "thread (1): collector-history;HistoryPump._run (collector/pump.py:76);"
        "Condition.wait (threading.py:327) 50",
        "thread (2): AnyIO worker thread;WorkerThread.run (anyio/_backends/_asyncio.py:1124);"
        "decode (collector/fastjson.py:21) 3",
    ])
    profiles = ingest_profile.parse(raw)
    pump = profiles["history pump thread (collector-history)"]
    assert (pump.samples, pump.waiting) == (7, 50)
    assert pump.own["write (sparkwatch/history/writer.py)"] == 7
    assert "Thread.run (threading.py)" not in pump.cumulative
    text = ingest_profile.summary(profiles)
    assert "request worker threads (AnyIO), 1 thread(s): 3 busy samples (30 %)" in text


def test_rendered_pushes_hold_only_their_query(tmp_path: Path) -> None:
    fleet = Fleet(queries=3)
    pushes = list(ingest_pushgw.render_pushes(fleet, 3, 3))
    assert [p.path for p in pushes] == [ingest_pushgw.group_path(fleet.app, fleet.query_id(q))
                                        for q in range(3)]
    body = pushes[1].body.decode()
    assert f'query_id="{fleet.query_id(1)}"' in body
    assert fleet.query_id(0) not in body and "spark_streaming_app_info" not in body
    assert 'spark_streaming_query_batches_total{' in body


def test_a_written_run_states_its_cpu_per_event_and_the_cores_the_target_takes() -> None:
    from bench.ingest.report import cpu_budget
    from bench.ingest.runs import Run

    run = Run("collector → PostgreSQL, written", 100_000, 67.48,
              extra={"db_backend_cpu_s": 25.1}, cpu_s=50.3)
    assert cpu_budget(run) == ("CPU per event: collector 503 µs + PostgreSQL 251 µs; "
                               "20,000 events/s at that cost takes 15.1 cores")
    assert cpu_budget(Run("floor: PostgreSQL COPY", 10, 1.0)) is None


def test_the_written_rate_is_stated_against_each_database_floor_of_the_same_run() -> None:
    from bench.ingest.report import floor_ratios
    from bench.ingest.runs import Run

    runs = [Run("collector → PostgreSQL, written", 50_000, 10.0),
            Run("collector → SQLite, written", 50_000, 25.0),
            Run("floor: PostgreSQL COPY", 50_000, 6.0),
            Run("floor: SQLite executemany", 50_000, 10.0)]
    assert floor_ratios(runs) == [
        "target written/floor ≥ 0.8× on PostgreSQL: 0.60× (5,000 of 8,333 events/s), MISSED",
        "target written/floor ≥ 0.8× on SQLite: 0.40× (2,000 of 5,000 events/s), MISSED",
    ]
    assert floor_ratios(runs[:1]) == []
    labelled = [Run("collector → PostgreSQL (before: 9be7f08), written", 50_000, 20.0), runs[2]]
    assert floor_ratios(labelled) == [
        "target written/floor ≥ 0.8× on PostgreSQL: 0.30× (2,500 of 8,333 events/s), MISSED"]
