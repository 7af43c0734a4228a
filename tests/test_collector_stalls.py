"""The stall job over more runs than a statement has parameters (PostgreSQL: 65,535; SQLite:
32,766): it still measures each run's trigger interval and clears each resumed run's mark, so
one tenant's many runs never make it fail for everyone."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.collector.stalls import StallDetection, _trigger_intervals
from sparkwatch.history.schema import QueryStall
from tests.test_history_support import (
    batch_of,
    load_sample,
    progress,
    utc,
    write,
)

NOW = utc("2026-11-21T12:00:00.000Z")
MANY = 70_000
"""More ids than either database takes as parameters of one statement."""


@pytest.fixture
def engine(history_url: str) -> Iterator[sa.Engine]:
    """The history's engine; on SQLite at SQLite's default limit of 32,766 variables a
    statement, which some builds (Debian's) raise to 250,000."""
    engine = sa.create_engine(history_url, poolclass=sa.pool.NullPool)
    if engine.dialect.name == "sqlite":
        @sa.event.listens_for(engine, "connect")
        def default_limit(dbapi_conn: sqlite3.Connection, _: Any) -> None:
            dbapi_conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32_766)
    yield engine
    engine.dispose()


def a_run(url: str, seconds_ago: list[float]) -> str:
    """A run with a batch at each of ``seconds_ago`` before :data:`NOW`; returns its id."""
    query_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    sample = load_sample("stream_stream_join_rocksdb")
    write(url, *[progress(batch_of(sample, batch_id, (NOW - timedelta(seconds=s)).isoformat(),
                                   id=query_id, runId=run_id))
                 for batch_id, s in enumerate(seconds_ago)])
    return run_id


def test_trigger_intervals_of_more_runs_than_a_statement_has_parameters(
    history_url: str, engine: sa.Engine,
) -> None:
    every_2s, every_5s = a_run(history_url, [8, 6, 4, 2]), a_run(history_url, [20, 15, 10, 5])
    unknown = [f"run-{i:05d}" for i in range(MANY)]  # running, but no batch in the history yet
    with engine.connect() as conn:
        intervals = _trigger_intervals(conn, [*unknown[:40_000], every_2s, *unknown[40_000:],
                                              every_5s])
    assert intervals == {every_2s: 2.0, every_5s: 5.0}


def test_the_stall_job_clears_more_marks_than_a_statement_has_parameters(
    history_url: str, engine: sa.Engine,
) -> None:
    a_run(history_url, [8, 6, 4, 2])  # migrates the history
    detected = NOW - timedelta(minutes=5)
    marks = [{"run_id": f"run-{i:05d}", "detected_at": detected, "tenant": "default",
              "query_id": f"query-{i:05d}", "name": None, "app_name": "orders-etl",
              "app_id": "app-1", "last_event_at": detected - timedelta(minutes=1),
              "threshold_seconds": 10.0, "cleared_at": None} for i in range(MANY)]
    with engine.begin() as conn:
        conn.execute(sa.insert(QueryStall), marks)
    # None of those runs is running any more (they ended, or retention deleted them).
    with engine.begin() as conn:
        assert StallDetection(intervals=5, min_seconds=5, horizon_days=7)(conn, NOW) == (0, MANY)
    s = QueryStall.__table__.c
    with engine.connect() as conn:
        still_open = conn.execute(sa.select(sa.func.count()).where(s.cleared_at.is_(None)))
        assert still_open.scalar_one() == 0
