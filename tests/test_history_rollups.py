"""The rollups' order statistics on real databases (SQLite and PostgreSQL): state rows at each
bucket's first and last batch, and the batch-duration p95 exactly as PostgreSQL's
``percentile_cont(0.95)`` computes it; and the slot claim shared with the collector's job."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.history import rollups
from sparkwatch.history.schema import JobRun, OperatorRollup, QueryRollup
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.contract import INT64_MAX
from sparkwatch.model.events import AppInfo, Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from tests.test_collector_support import fresh_ids, recorded

APP = AppInfo("rollups-app", "app-rollups-1", "4.3.0")
NOON = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NOW = NOON + timedelta(hours=1, minutes=45)

# (minutes after noon, batch duration ms, state rows of operator 0). Batches 3 and 4 share a
# timestamp: the later batch id is the bucket's last.
BATCHES = [
    (5, 300, 50), (10, 100, 70), (20, 1000, 65), (40, 200, 90), (40, 400, 80),
    (61, 10, 100), (90, 20, 95),
]


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def progress(query_id: str, run_id: str) -> list[dict[str, Any]]:
    source = recorded()["progress"][0]
    out = []
    for batch_id, (minutes, duration, rows) in enumerate(BATCHES):
        p = copy.deepcopy(source)
        p.update(id=query_id, runId=run_id, batchId=batch_id,
                 timestamp=iso(NOON + timedelta(minutes=minutes)), batchDuration=duration)
        p["stateOperators"][0]["numRowsTotal"] = rows
        out.append(p)
    return out


def write(url: str, payloads: list[dict[str, Any]], app: AppInfo = APP) -> None:
    writer = HistoryWriter(url)
    writer.write([parse_envelope(Envelope(EventKind.PROGRESS, app, NOW.timestamp(), p))
                  for p in payloads])
    writer.close()


def rolled_up(url: str, query_id: str, resolution: str) -> tuple[dict, dict]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            q, o = QueryRollup.__table__.c, OperatorRollup.__table__.c
            queries = {r.bucket_start: r for r in conn.execute(sa.select(QueryRollup.__table__)
                       .where(q.query_id == query_id, q.resolution == resolution))}
            operators = {r.bucket_start: r for r in conn.execute(
                sa.select(OperatorRollup.__table__).where(
                    o.query_id == query_id, o.resolution == resolution, o.operator_index == 0))}
            return queries, operators
    finally:
        engine.dispose()


def recompute(url: str, now: datetime = NOW) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            return rollups.recompute(conn, now, lookback_seconds=7200)
    finally:
        engine.dispose()


def rolled_up_query(
    url: str, batches: Callable[..., list[dict[str, Any]]] = progress, now: datetime = NOW,
) -> str:
    """A fresh query's ``batches`` written and rolled up as of ``now``: its id."""
    ids = fresh_ids()
    write(url, batches(**ids))
    recompute(url, now)
    return ids["query_id"]


def test_hour_rollups_keep_first_and_last_state_rows_and_the_p95_duration(
    history_url: str,
) -> None:
    query_id = rolled_up_query(history_url)
    queries, operators = rolled_up(history_url, query_id, "hour")
    one, two = NOON, NOON + timedelta(hours=1)
    assert sorted(queries) == [one, two]
    # Sorted durations 100, 200, 300, 400, 1000: position 0.95 * 4 = 3.8 -> 400 + 0.8 * 600.
    assert queries[one].batch_duration_ms_p95 == pytest.approx(880.0)
    assert queries[one].batch_duration_ms_max == 1000
    # Two batches: 10 + 0.95 * (20 - 10).
    assert queries[two].batch_duration_ms_p95 == pytest.approx(19.5)
    assert (operators[one].num_rows_total_first, operators[one].num_rows_total_last) == (50, 80)
    assert operators[one].num_rows_total_max == 90
    assert (operators[two].num_rows_total_first, operators[two].num_rows_total_last) == (100, 95)


def test_minute_rollups_break_timestamp_ties_by_batch_id(history_url: str) -> None:
    query_id = rolled_up_query(history_url, now=NOON + timedelta(minutes=45))
    queries, operators = rolled_up(history_url, query_id, "minute")
    tied = NOON + timedelta(minutes=40)
    assert (operators[tied].num_rows_total_first, operators[tied].num_rows_total_last) == (90, 80)
    assert queries[tied].batch_duration_ms_p95 == pytest.approx(390.0)  # 200 + 0.95 * 200
    single = NOON + timedelta(minutes=20)
    assert queries[single].batch_duration_ms_p95 == 1000.0
    assert operators[single].num_rows_total_first == operators[single].num_rows_total_last == 65


@pytest.mark.postgres
def test_p95_equals_postgresql_percentile_cont(pg_url: str) -> None:
    query_id = rolled_up_query(pg_url)
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        native = dict(conn.execute(sa.text(
            "SELECT date_trunc('hour', timestamp), percentile_cont(0.95) WITHIN GROUP "
            "(ORDER BY batch_duration_ms) FROM batches WHERE query_id = :q GROUP BY 1"),
            {"q": query_id}).all())
    engine.dispose()
    queries, _ = rolled_up(pg_url, query_id, "hour")
    assert {b: r.batch_duration_ms_p95 for b, r in queries.items()} == pytest.approx(native)


def test_a_slot_is_rolled_up_once_across_writers(history_url: str) -> None:
    ids = fresh_ids()
    write(history_url, progress(**ids))
    engine = sa.create_engine(history_url)
    try:
        ran = []
        for replica, at in (("driver-a", NOW), ("driver-b", NOW + timedelta(seconds=30)),
                            ("driver-b", NOW + timedelta(seconds=60))):
            with engine.begin() as conn:
                ran.append(rollups.recompute_once_per_slot(conn, at, 60, replica))
    finally:
        engine.dispose()
    assert ran == [True, False, True]
    engine = sa.create_engine(history_url)
    try:
        with engine.begin() as conn:  # a day later the old claims are gone, the new one kept
            assert rollups.recompute_once_per_slot(conn, NOW + timedelta(days=1, minutes=2), 60,
                                                   "driver-a")
            slots = conn.execute(sa.select(JobRun.slot)).scalars().all()
    finally:
        engine.dispose()
    assert slots == [NOW + timedelta(days=1, minutes=2)]
    queries, _ = rolled_up(history_url, ids["query_id"], "hour")
    assert queries[NOON].batches == 5


def test_day_rollups_aggregate_the_hours_exactly(history_url: str) -> None:
    query_id = rolled_up_query(history_url)
    queries, operators = rolled_up(history_url, query_id, "day")
    (day,) = queries
    assert day == datetime(2026, 11, 21, tzinfo=UTC)
    q, o = queries[day], operators[day]
    assert (q.batches, q.batch_duration_ms_max) == (7, 1000)
    assert q.batch_duration_ms_sum == sum(d for _, d, _ in BATCHES)
    assert q.batch_duration_ms_p95 is None  # a day's percentile would need its raw batches
    assert (o.num_rows_total_first, o.num_rows_total_last, o.num_rows_total_max) == (50, 95, 100)
    assert o.num_rows_total_avg == pytest.approx(sum(r for _, _, r in BATCHES) / 7)


def test_an_upgraded_history_gets_day_rollups_for_its_older_hours_once(history_url: str) -> None:
    """Hour rollups written before migration 0006 (no first/last/p95, no day rows) far outside
    the lookback: the next run backfills their days from them, later runs only the lookback."""
    ids = fresh_ids()
    write(history_url, progress(**ids))
    old = NOON - timedelta(days=10)
    engine = sa.create_engine(history_url)
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(QueryRollup), [{
                "query_id": ids["query_id"], "resolution": "hour", "bucket_start": old + h,
                "batches": 3, "num_input_rows": 30, "batch_duration_ms_sum": 600,
                "batch_duration_ms_max": 250} for h in (timedelta(0), timedelta(hours=5))])
        assert recompute(history_url) > 0
        queries, _ = rolled_up(history_url, ids["query_id"], "day")
        backfilled = queries[datetime(2026, 11, 11, tzinfo=UTC)]
        assert (backfilled.batches, backfilled.batch_duration_ms_max) == (6, 250)
        with engine.begin() as conn:  # backfilled once: a later run touches only its lookback
            conn.execute(sa.update(QueryRollup).where(QueryRollup.resolution == "day",
                                                      QueryRollup.bucket_start < NOON)
                         .values(batches=-1))
        recompute(history_url)
        queries, _ = rolled_up(history_url, ids["query_id"], "day")
        assert queries[datetime(2026, 11, 11, tzinfo=UTC)].batches == -1
        assert queries[datetime(2026, 11, 21, tzinfo=UTC)].batches == 7
    finally:
        engine.dispose()


def largest(query_id: str, run_id: str) -> list[dict[str, Any]]:
    """Two batches in the hour from noon, each with the largest count and duration the contract
    accepts: their sums do not fit a 64-bit integer."""
    out = progress(query_id, run_id)[:2]
    for p in out:
        p.update(numInputRows=INT64_MAX, batchDuration=INT64_MAX)
        p["stateOperators"][0].update(numRowsUpdated=INT64_MAX, allUpdatesTimeMs=INT64_MAX)
    return out


def test_rollup_sums_beyond_int64_saturate_at_int64_max_in_hours_and_days(
    history_url: str,
) -> None:
    query_id = rolled_up_query(history_url, largest)
    for resolution, bucket in (("hour", NOON), ("day", datetime(2026, 11, 21, tzinfo=UTC))):
        queries, operators = rolled_up(history_url, query_id, resolution)
        q, o = queries[bucket], operators[bucket]
        assert (q.batches, q.num_input_rows, q.batch_duration_ms_sum, q.batch_duration_ms_max) \
            == (2, INT64_MAX, INT64_MAX, INT64_MAX)
        assert (o.batches, o.num_rows_updated, o.all_updates_time_ms) == (2, INT64_MAX, INT64_MAX)
        assert (o.num_rows_removed, o.commit_time_ms) == (0, 2 * 139)  # the recorded batch's
    queries, _ = rolled_up(history_url, query_id, "hour")
    assert queries[NOON].batch_duration_ms_p95 == pytest.approx(float(INT64_MAX))
    minutes, _ = rolled_up(history_url, query_id, "minute")  # one batch each: exact
    assert [r.num_input_rows for _, r in sorted(minutes.items())] == [INT64_MAX, INT64_MAX]


def test_a_saturated_query_leaves_other_apps_rollups_exact_in_the_same_run(
    history_url: str,
) -> None:
    large, other = fresh_ids(), fresh_ids()
    write(history_url, largest(**large))
    write(history_url, progress(**other), app=AppInfo("other-app", "app-other-1", "4.3.0"))
    assert recompute(history_url) > 0
    queries, operators = rolled_up(history_url, other["query_id"], "hour")
    one, two = NOON, NOON + timedelta(hours=1)
    # The recorded batch: 8 input rows, 5 state rows updated; durations as in BATCHES.
    assert [(q.batches, q.num_input_rows, q.batch_duration_ms_sum)
            for q in (queries[one], queries[two])] == [(5, 40, 2000), (2, 16, 30)]
    assert [o.num_rows_updated for o in (operators[one], operators[two])] == [25, 10]
    days, day_operators = rolled_up(history_url, other["query_id"], "day")
    (day,) = days
    assert (days[day].batches, days[day].num_input_rows, days[day].batch_duration_ms_sum) \
        == (7, 56, 2030)
    assert (day_operators[day].num_rows_updated, day_operators[day].commit_time_ms) \
        == (35, 7 * 139)
    assert rolled_up(history_url, large["query_id"], "day")[0][day].num_input_rows == INT64_MAX
