"""Poison quarantine with real processes and a real PostgreSQL: an event the database refuses
(here a CHECK constraint refusing one query name, standing in for any value or constraint the
history cannot take) is set aside with its reason; every other app's events are written once;
a restart does not bring it back; `sparkwatch quarantine` lists and replays it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sparkwatch.collector.quarantine import Quarantine
from sparkwatch.history import migrate
from tests.support import wait_for
from tests.test_collector_support import (
    Collector,
    count_rows,
    fresh_ids,
    run_events,
    samples,
    scalar,
)

pytestmark = pytest.mark.postgres
REFUSE = "ALTER TABLE query_runs ADD CONSTRAINT no_poison CHECK (name IS DISTINCT FROM 'poison')"


def _execute(url: str, sql: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(sql))
    engine.dispose()


def _batches(url: str, run_id: str) -> int:
    return count_rows(url, "select count(*) from batches where run_id = :r", r=run_id)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", "quarantine", *args],
                          capture_output=True, text=True, timeout=120)


def test_a_poison_event_is_quarantined_and_never_stops_the_others(
    pg_url: str, tmp_path: Path
) -> None:
    migrate.upgrade(pg_url)
    _execute(pg_url, REFUSE)
    a, b, poison_ids = fresh_ids(), fresh_ids(), fresh_ids()
    app_a = {"name": "app-a", "id": "app-a-1", "spark_version": "4.3.0"}
    app_b = {"name": "app-b", "id": "app-b-1", "spark_version": "4.3.0"}
    run_a = run_events(app=app_a, **a)
    run_b = run_events("window_agg_rocksdb", app=app_b, **b)
    poison = [e for e in run_events(app=app_b, **poison_ids) if e["kind"] == "progress"][:1]
    poison[0]["payload"]["name"] = "poison"
    spool = tmp_path / "spool"
    collector = Collector(pg_url, spool)
    collector.start()
    try:
        # One request mixing both apps around the poison: one span of the spool.
        assert collector.post(run_a[:3] + poison + run_b[:3]).json()["accepted"] == 7
        assert collector.post(run_a[3:] + run_b[3:]).json()["accepted"] == \
            len(run_a) + len(run_b) - 6
        progress = {r: sum(e["kind"] == "progress" for e in run) for r, run in
                    ((a["run_id"], run_a), (b["run_id"], run_b))}
        wait_for(lambda: all(_batches(pg_url, r) == n for r, n in progress.items()), 60,
                 "every good batch of both apps in the history")
        wait_for(lambda: [v for _, v in samples(
            collector.metrics(), "sparkwatch_collector_events_quarantined_total")] == [1.0],
            30, "the poison counted")
        [entry] = Quarantine(spool).entries()
        assert "no_poison" in entry.reason and entry.event["payload"]["name"] == "poison"
        assert _batches(pg_url, poison_ids["run_id"]) == 0
        collector.stop()
        collector.start()  # a restart replays nothing of it
        assert collector.post(run_events(app=app_a, **fresh_ids())[:2]).status_code == 200
        wait_for(lambda: collector.get("/readyz").json()["spool"]["pending_bytes"] == 0, 30,
                 "the spool drained after the restart")
        assert len(Quarantine(spool).entries()) == 1
        assert all(_batches(pg_url, r) == n for r, n in progress.items())  # once each
    finally:
        collector.stop()
    listed = _cli("list", "--spool-dir", str(spool))
    assert listed.returncode == 0 and entry.id in listed.stdout and "no_poison" in listed.stdout
    still = _cli("replay", "--spool-dir", str(spool), "--history-url", pg_url)
    assert still.returncode == 1 and "still refused" in still.stdout
    _execute(pg_url, "ALTER TABLE query_runs DROP CONSTRAINT no_poison")
    replayed = _cli("replay", "--spool-dir", str(spool), "--history-url", pg_url)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert _batches(pg_url, poison_ids["run_id"]) == 1
    assert Quarantine(spool).entries() == []
    assert scalar(pg_url, "select name from query_runs where run_id = :r",
                  r=poison_ids["run_id"]) == "poison"


def test_the_quarantine_is_bounded_and_keeps_what_it_holds_when_full(tmp_path: Path) -> None:
    from sparkwatch.collector.quarantine import QuarantineFull

    quarantine = Quarantine(tmp_path, max_bytes=600)
    event = {"kind": "progress", "payload": {"id": "q", "blob": "x" * 200}}
    assert quarantine.add([(event, "refused")]) == 1
    assert quarantine.add([(event, "refused")]) == 0  # the same event is held once
    with pytest.raises(QuarantineFull, match="quarantine_max_bytes"):
        quarantine.add([({**event, "payload": {"id": "r", "blob": "y" * 400}}, "refused")])
    assert [e.event for e in quarantine.entries()] == [event]


def test_a_torn_last_line_costs_only_itself(tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path)
    event = {"kind": "idle", "payload": {"id": "q"}}
    quarantine.add([(event, "refused")])
    with open(quarantine.path, "a") as f:
        f.write('{"id": "torn", "at": 1, "rea')  # a crash mid-append
    assert [e.event for e in quarantine.entries()] == [event]
    listed = _cli("list", "--spool-dir", str(tmp_path))
    assert listed.returncode == 0 and "1 quarantined event" in listed.stdout


def test_a_line_nested_past_python_s_limit_costs_only_itself(tmp_path: Path) -> None:
    """Written by hand (a collector's events hold 32 levels): its RecursionError traced back in
    `quarantine list` and `drop`, and failed every later quarantine of the collector."""
    quarantine = Quarantine(tmp_path)
    event = {"kind": "idle", "payload": {"id": "q"}}
    quarantine.add([(event, "refused")])
    with open(quarantine.path, "a") as f:
        f.write('{"id": "deep", "at": 1, "reason": "r", "event": ' + "[" * 200_000 + "\n")
    later = {"kind": "idle", "payload": {"id": "q2"}}
    assert quarantine.add([(later, "refused")]) == 1
    assert [e.event for e in quarantine.entries()] == [event, later]
    listed = _cli("list", "--spool-dir", str(tmp_path))
    assert listed.returncode == 0 and "2 quarantined events" in listed.stdout, listed.stderr
    first = quarantine.entries()[0].id
    dropped = _cli("drop", "--spool-dir", str(tmp_path), first)
    assert dropped.returncode == 0 and "Traceback" not in dropped.stderr, dropped.stderr
    assert [e.event for e in quarantine.entries()] == [later]


def test_a_quarantined_event_keeps_the_tenant_that_pushed_it(tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path, 1 << 20)
    quarantine.add([({"kind": "progress", "n": 1}, "refused")], ["alpha"])
    quarantine.add([({"kind": "progress", "n": 2}, "refused")])
    assert [e.tenant for e in quarantine.entries()] == ["alpha", "default"]


def test_an_entry_added_after_a_torn_last_line_is_kept(tmp_path: Path) -> None:
    quarantine = Quarantine(tmp_path)
    first, second = ({"kind": "idle", "payload": {"id": q}} for q in ("q1", "q2"))
    quarantine.add([(first, "refused")])
    with open(quarantine.path, "a") as f:
        f.write('{"id": "torn", "at": 1, "rea')  # a crash mid-append
    assert quarantine.add([(second, "refused")]) == 1
    assert [e.event for e in quarantine.entries()] == [first, second]


def _as_admin(url: str, *statements: str) -> None:
    """``statements`` on the test's database, from the server's ``postgres`` database (ALTER
    DATABASE and ending its sessions cannot run from inside it)."""
    import sqlalchemy as sa

    database = sa.engine.make_url(url).database
    engine = sa.create_engine(sa.engine.make_url(url).set(database="postgres"),
                              isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        for sql in statements:
            conn.execute(sa.text(sql.replace("{db}", database)))
    engine.dispose()


def _self_metric(collector: Collector, name: str) -> list[float]:
    return [v for _, v in samples(collector.metrics(), f"sparkwatch_collector_{name}")]


READ_ONLY = "ALTER DATABASE {db} SET default_transaction_read_only = on"
WRITABLE = "ALTER DATABASE {db} RESET default_transaction_read_only"
END_SESSIONS = ("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = '{db}' AND pid <> pg_backend_pid()")


def test_a_read_only_database_keeps_acknowledged_events_spooled_not_quarantined(
    pg_url: str, tmp_path: Path
) -> None:
    # As after a failover onto a standby: every write is refused ("cannot execute INSERT in a
    # read-only transaction"), whatever the data. Such events all went to the quarantine at once.
    migrate.upgrade(pg_url)
    ids = fresh_ids()
    run = run_events(**ids)
    progress = sum(e["kind"] == "progress" for e in run)
    spool = tmp_path / "spool"
    collector = Collector(pg_url, spool)
    collector.start()
    try:
        assert collector.post(run[:2]).json()["accepted"] == 2
        wait_for(lambda: collector.get("/readyz").json()["spool"]["pending_bytes"] == 0, 30,
                 "the first events written")
        _as_admin(pg_url, READ_ONLY, END_SESSIONS)
        assert collector.post(run[2:]).json()["accepted"] == len(run) - 2
        # The first attempt may meet the ended session; those after it, the read-only database.
        wait_for(lambda: _self_metric(collector, "history_write_failures_total")[0] >= 3, 60,
                 "writes refused by the read-only database")
        assert _self_metric(collector, "history_up") == [0.0]
        assert _self_metric(collector, "events_quarantined_total") == [0.0]
        assert _batches(pg_url, ids["run_id"]) < progress
        _as_admin(pg_url, WRITABLE, END_SESSIONS)
        wait_for(lambda: _batches(pg_url, ids["run_id"]) == progress, 60,
                 "every batch written once the database takes writes")
        assert _self_metric(collector, "history_up") == [1.0]
        assert _self_metric(collector, "events_quarantined_total") == [0.0]
        assert Quarantine(spool).entries() == []
    finally:
        collector.stop()
