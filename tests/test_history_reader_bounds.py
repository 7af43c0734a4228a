"""Bounds of the reader's list answers: a runs page carries an excerpt of each exception (its
size stays bounded however long the exceptions), and plans are paged in SQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from sparkwatch.history.reader import EXCEPTION_EXCERPT_CHARS, HistoryReader
from sparkwatch.history.schema import OperatorPlan, QueryRun, RunTrigger
from sparkwatch.history.views import to_dict
from tests.test_history_support import engine_for, migrated_database

MANY = "bounds-many-runs-0000-0000-000000000000"
PLANNED = "bounds-planned-0000-0000-0000-00000000"
HUGE = "\x01" * 65_536
T0 = datetime(2026, 11, 1, tzinfo=UTC)
RUNS = 1_000


def _run(query_id: str, n: int, exception: str | None) -> dict[str, object]:
    at = T0 + timedelta(minutes=n)
    return {"run_id": f"{query_id[:8]}-run-{n:05d}", "query_id": query_id, "name": query_id[:14],
            "app_name": "app", "app_id": "app-1", "spark_version": "4.0.0", "status": "failed",
            "started_at": at, "last_event_at": at, "exception": exception,
            "error_class": "STREAM_FAILED" if exception else None, "tenant": "default",
            "batches": 0}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    for url in migrated_database(request):
        engine = engine_for(url)
        with engine.begin() as conn:
            conn.execute(sa.insert(QueryRun), [
                _run(MANY, n, HUGE if n % 3 else ("short one\n\tat X" if n % 2 else None))
                for n in range(RUNS)])
            runs = [_run(PLANNED, n, None) for n in range(7)]
            conn.execute(sa.insert(QueryRun), runs)
            # Runs 0-4 have state operators (1 to 3 of them); 5 and 6 a trigger only; one tie.
            read_at = {n: T0 + timedelta(minutes=min(n, 5)) for n in range(7)}
            conn.execute(sa.insert(OperatorPlan), [
                {"run_id": runs[n]["run_id"], "operator_index": i, "query_id": PLANNED,
                 "read_at": read_at[n], "batch_id": 0, "source": "plan", "note": None,
                 "operator_name": f"op{i}", "kind": "aggregate", "keys": ["k"], "details": {},
                 "settings": {}}
                for n in range(5) for i in range(1 + n % 3)])
            conn.execute(sa.insert(RunTrigger), [
                {"run_id": runs[n]["run_id"], "query_id": PLANNED, "read_at": read_at[n],
                 "trigger_kind": "processing_time", "trigger_interval_ms": 1000}
                for n in (1, 5, 6)])
        yield url


@pytest.fixture(scope="module")
def reader(url: str) -> Iterator[HistoryReader]:
    with HistoryReader(url) as r:
        yield r


def test_a_page_of_runs_with_huge_exceptions_stays_small(reader: HistoryReader) -> None:
    page = reader.runs(MANY, limit=1000)
    assert len(page) == RUNS
    body = json.dumps([to_dict(r) for r in page])
    # HEAD answered every 65,536-char exception whole: 667 of them, 262 MB of JSON escapes.
    assert len(body) < 8_000_000
    huge = [r for r in page if r.exception_chars == len(HUGE)]
    assert len(huge) == 666
    assert all(r.exception == HUGE[:EXCEPTION_EXCERPT_CHARS] for r in huge)


def test_runs_keep_their_order_and_small_exceptions_whole(reader: HistoryReader) -> None:
    page = reader.runs(MANY, limit=10, offset=5)
    assert [r.run_id for r in page] == [f"bounds-m-run-{n:05d}" for n in range(994, 984, -1)]
    by_id = {r.run_id: r for r in reader.runs(MANY, limit=12)}
    short = by_id["bounds-m-run-00993"]  # 993 % 3 == 0, odd
    assert (short.exception, short.exception_chars) == ("short one\n\tat X", 15)
    none = by_id["bounds-m-run-00990"]
    assert (none.exception, none.exception_chars) == (None, None)


def test_the_whole_exception_of_one_run_is_read_on_its_own(reader: HistoryReader) -> None:
    assert reader.exception(MANY, "bounds-m-run-00998") == HUGE
    assert reader.exception(MANY, "bounds-m-run-00990") is None
    assert reader.exception(MANY, "no-such-run") is None


def test_plans_are_paged_in_sql_in_the_order_of_the_whole_list(
        reader: HistoryReader, url: str) -> None:
    whole = reader.plans(PLANNED)
    assert len(whole) == 7
    assert [p.read_at for p in whole] == sorted((p.read_at for p in whole), reverse=True)
    assert [len(p.operators) for p in whole if p.trigger is None] == [2, 1, 3, 1]
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    engine = reader._engine
    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        for offset in range(8):
            for limit in (1, 2, 3, 7):
                page = reader.plans(PLANNED, limit=limit, offset=offset)
                assert page == whole[offset:offset + limit], (offset, limit)
        one = reader.plans(PLANNED, run_id=whole[2].run_id, limit=5)
        assert one == [whole[2]]
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    assert any("LIMIT" in s and "operator_plans" in s and "run_triggers" in s
               for s in statements)
    # The page's operator rows are read by run id, never the query's whole set.
    reads = [s for s in statements if s.lstrip().startswith("SELECT operator_plans.run_id")]
    assert reads and all(" IN " in s for s in reads)
