"""Each run's first and last batch id and latest batch time, kept on its ``query_runs`` row
(migration 0013) so that the queries and runs pages read no batch rows: right after writes in
order, out of order and replayed (both of the writer's paths on each dialect), after the
migration's backfill, and after retention (the bounds of what the run recorded: retention leaves
them, while ``batches`` counts the rows still held)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.sql.util import find_tables

from sparkwatch.collector.retention import Retention
from sparkwatch.console import history as console_history
from sparkwatch.history import migrate
from sparkwatch.history.bounds import widen_from_recent
from sparkwatch.history.reader import HistoryReader, _queries_select, _runs_select
from sparkwatch.history.rollups import recompute
from sparkwatch.history.schema import Batch, QueryRun
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import ParsedEvent
from tests.test_history_support import (
    batch_of,
    engine_for,
    idle,
    load_sample,
    progress,
    started,
    terminated,
)

AGG = load_sample("window_agg")
QUERY = AGG["id"]
RUN, OTHER_RUN = AGG["runId"], "00000000-0000-4000-8000-0000000000b2"
T0 = datetime(2026, 11, 21, 9, 0, tzinfo=UTC)
BOUNDS = ("first_batch_id", "last_batch_id", "last_progress_at")


def at(minute: float) -> datetime:
    return T0 + timedelta(minutes=minute)


def iso(t: datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def batch(batch_id: int, minute: float, run_id: str = RUN) -> ParsedEvent:
    return progress(batch_of(AGG, batch_id, iso(at(minute)), runId=run_id))


def write_each(url: str, *writes: list[ParsedEvent]) -> list[bool | None]:
    """Each list in one write of one writer; returns whether COPY was used (None: SQLite)."""
    w = HistoryWriter(url)
    try:
        for events in writes:
            w.write(events)
        return [w._copy] if writes else []
    finally:
        w.close()


def bounds(url: str, run_id: str = RUN) -> tuple[Any, ...]:
    runs = QueryRun.__table__.c
    with engine_for(url).connect() as conn:
        row = conn.execute(sa.select(*(runs[c] for c in BOUNDS), runs.batches)
                           .where(runs.run_id == run_id)).one()
    return tuple(row)


def from_batches(url: str, run_id: str = RUN) -> tuple[Any, ...]:
    """What the readers computed before migration 0013: min/max over the run's batch rows."""
    b = Batch.__table__.c
    with engine_for(url).connect() as conn:
        row = conn.execute(sa.select(sa.func.min(b.batch_id), sa.func.max(b.batch_id),
                                     sa.func.max(b.timestamp), sa.func.count())
                           .where(b.run_id == run_id)).one()
    return tuple(row)


def test_bounds_after_batches_written_in_order(history_url: str) -> None:
    write_each(history_url, [started(QUERY, RUN, "window_agg", iso(at(-1)))],
               [batch(0, 0), batch(1, 1)], [batch(2, 2)], [batch(3, 3), batch(4, 4)])
    assert bounds(history_url) == (0, 4, at(4), 5)
    assert bounds(history_url) == from_batches(history_url)


def test_bounds_after_batches_written_out_of_order(history_url: str) -> None:
    # Newer batches first, then older ones (ids and times), and a batch id that is later but
    # stamped earlier (a driver clock stepping back): each bound is its own least or greatest.
    write_each(history_url, [batch(5, 5)], [batch(3, 3), batch(2, 2)], [batch(7, 4)],
               [batch(6, 6), batch(1, 1)])
    assert bounds(history_url) == (1, 7, at(6), 6)
    assert bounds(history_url) == from_batches(history_url)
    # Within one write too, on a run of its own.
    write_each(history_url, [batch(9, 9, OTHER_RUN), batch(4, 14, OTHER_RUN),
                             batch(8, 8, OTHER_RUN)])
    assert bounds(history_url, OTHER_RUN) == (4, 9, at(14), 3)


def test_replayed_and_late_batches_never_narrow_the_bounds(history_url: str) -> None:
    [copy] = write_each(history_url, [batch(b, b) for b in range(5)])
    assert copy is (not history_url.startswith("sqlite"))  # PostgreSQL: COPY wrote them
    # A replay of older batches alone (the fast paths roll back, the INSERTs find them there),
    # then a replay mixed with a new batch, then events without batches.
    write_each(history_url, [batch(1, 1)], [batch(2, 2), batch(3, 3), batch(5, 5)],
               [idle(QUERY, RUN, iso(at(6)))], [batch(0, 0)])
    assert bounds(history_url) == (0, 5, at(5), 6)
    write_each(history_url, [terminated(QUERY, RUN, iso(at(7)))])
    assert bounds(history_url) == (0, 5, at(5), 6) == from_batches(history_url)


def test_a_run_without_batches_has_no_bounds(history_url: str) -> None:
    write_each(history_url, [started(QUERY, OTHER_RUN, "window_agg", iso(at(0)))],
               [idle(QUERY, OTHER_RUN, iso(at(1)))])
    assert bounds(history_url, OTHER_RUN) == (None, None, None, 0)
    with HistoryReader(history_url) as reader:
        [run] = reader.runs(QUERY)
        [query] = reader.queries()
    assert (run.first_batch_id, run.last_batch_id, run.batches) == (None, None, 0)
    assert (query.last_batch_id, query.last_progress_at) == (None, None)


def test_the_pages_show_what_min_and_max_over_the_batches_showed(history_url: str) -> None:
    """Two runs of one query: the queries page's last batch is the latest run's, its last
    progress the query's latest batch of any run; each run's first and last batch."""
    write_each(history_url, [started(QUERY, OTHER_RUN, "window_agg", iso(at(0)))],
               [batch(b, b, OTHER_RUN) for b in range(3)],
               [terminated(QUERY, OTHER_RUN, iso(at(10)), "boom", "STREAM_FAILED")],
               [started(QUERY, RUN, "window_agg", iso(at(20)))],
               [batch(3, 21), batch(4, 22)], [idle(QUERY, RUN, iso(at(30)))])
    with HistoryReader(history_url) as reader:
        [query] = reader.queries()
        new, old = reader.runs(QUERY)
    assert (query.latest_run_id, query.runs, query.batches) == (RUN, 2, 5)
    assert (query.last_batch_id, query.last_progress_at) == (4, at(22))
    assert query.last_progress_at is not None and query.last_progress_at.tzinfo is not None
    assert (new.run_id, new.first_batch_id, new.last_batch_id, new.batches) == (RUN, 3, 4, 2)
    assert (old.run_id, old.first_batch_id, old.last_batch_id, old.batches) == (
        OTHER_RUN, 0, 2, 3)
    assert from_batches(history_url, RUN)[:2] == (3, 4)
    assert from_batches(history_url, OTHER_RUN)[:2] == (0, 2)


def test_the_upgrade_fills_in_the_bounds_of_a_history_written_at_0012(history_url: str) -> None:
    write_each(history_url, [batch(b, b) for b in (2, 0, 1)], [batch(3, 3)],
               [batch(b, 10 + b, OTHER_RUN) for b in range(4)])
    lone = "00000000-0000-4000-8000-0000000000c3"
    write_each(history_url, [started(QUERY, lone, None, iso(at(30)))])
    written = {r: bounds(history_url, r) for r in (RUN, OTHER_RUN, lone)}
    assert written == {RUN: (0, 3, at(3), 4), OTHER_RUN: (0, 3, at(13), 4),
                       lone: (None, None, None, 0)}
    migrate.downgrade(history_url, "0012")
    columns = {c["name"] for c in sa.inspect(engine_for(history_url)).get_columns("query_runs")}
    assert columns.isdisjoint(BOUNDS) and "batches" in columns
    migrate.upgrade(history_url)
    assert {r: bounds(history_url, r) for r in written} == written
    assert bounds(history_url, OTHER_RUN) == from_batches(history_url, OTHER_RUN)
    # The writer goes on from the backfilled bounds.
    write_each(history_url, [batch(4, 4), batch(1, 1)])
    assert bounds(history_url) == (0, 4, at(4), 5)


RETENTION_NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_retention_leaves_the_bounds_of_what_the_run_recorded(history_url: str) -> None:
    """Retention deletes a run's old batches (rows or whole days) and subtracts them from its
    count; its bounds stay those of every batch the history recorded for it: first_batch_id is
    the first one recorded, though its row is gone, and a run with no batch row left keeps all
    three (no batch row is read to narrow them)."""
    days = [10, 9, 8, 1]
    times = [RETENTION_NOW - timedelta(days=d) for d in days]
    write_each(history_url, [progress(batch_of(AGG, b, iso(t))) for b, t in enumerate(times)])
    assert bounds(history_url) == (0, 3, times[3], 4)

    def retain(raw_days: float) -> dict[str, int]:
        engine = sa.create_engine(history_url)
        try:
            with engine.begin() as conn:
                return Retention(raw_days=raw_days, rollup_days=90)(conn, RETENTION_NOW)
        finally:
            engine.dispose()

    assert retain(7)["batches"] == 3
    assert from_batches(history_url) == (3, 3, times[3], 1)
    assert bounds(history_url) == (0, 3, times[3], 1)
    with HistoryReader(history_url) as reader:
        [run] = reader.runs(QUERY)
        [query] = reader.queries()
    assert (run.first_batch_id, run.last_batch_id, run.batches) == (0, 3, 1)
    assert (query.last_batch_id, query.last_progress_at, query.batches) == (3, times[3], 1)

    assert retain(0.01)["batches"] == 1
    assert from_batches(history_url) == (None, None, None, 0)
    assert bounds(history_url) == (0, 3, times[3], 0)
    with HistoryReader(history_url) as reader:
        [run] = reader.runs(QUERY)
    assert (run.first_batch_id, run.last_batch_id, run.batches) == (0, 3, 0)


# --- the pages read no batch row -----------------------------------------------------------

_READS_BATCHES = re.compile(r"\b(FROM|JOIN)\s+\"?batches\"?(?!\w)", re.IGNORECASE)


def _console_page() -> sa.Select[Any]:
    latest = console_history._latest_runs(None).subquery()
    return console_history._page(latest, console_history._rank(latest, T0.timestamp()), 0)


@pytest.mark.parametrize("statement", [
    pytest.param(lambda: _queries_select(100, 0), id="queries"),
    pytest.param(lambda: _queries_select(100, 0, "team-a"), id="queries-of-a-tenant"),
    pytest.param(lambda: _runs_select(QUERY), id="runs"),
    pytest.param(_console_page, id="console-overview"),
])
def test_the_pages_statements_name_no_batches_table(statement: Any) -> None:
    stmt = statement()
    assert Batch.__table__ not in find_tables(stmt, include_selects=True)
    assert QueryRun.__table__ in find_tables(stmt, include_selects=True)
    for dialect in (sa.dialects.sqlite.dialect(), sa.dialects.postgresql.dialect()):
        assert not _READS_BATCHES.search(str(stmt.compile(dialect=dialect)))


@pytest.fixture
def statements() -> Iterator[list[str]]:
    """Every SQL statement executed meanwhile (by any engine of this process)."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)


def test_the_queries_and_runs_pages_execute_no_read_of_batches(
    history_url: str, statements: list[str]
) -> None:
    write_each(history_url, [batch(b, b) for b in range(3)])
    with HistoryReader(history_url) as reader:
        reader.queries()  # the schema check first
        statements.clear()
        [query] = reader.queries()
        [run] = reader.runs(QUERY)
    assert (query.last_batch_id, run.first_batch_id, run.last_batch_id) == (2, 0, 2)
    assert len(statements) >= 2
    assert [s for s in statements if _READS_BATCHES.search(s)] == []
    assert any(re.search(r"\bquery_runs\b", s) for s in statements)


def test_the_rollups_pass_brings_bounds_an_older_writer_left_short_up_to_its_batches(
    history_url: str,
) -> None:
    """A writer of a release before 0013 still attached after the upgrade (a driver, an old
    collector replica during a rolling update) writes batches and runs without the bounds;
    the pages read only the runs, so they stayed short, or empty, for good."""
    write_each(history_url, [batch(b, b, RUN) for b in range(6)],
               [batch(b, b, OTHER_RUN) for b in range(3)])
    truth = {run: from_batches(history_url, run) for run in (RUN, OTHER_RUN)}
    engine = engine_for(history_url)
    with engine.begin() as conn:  # what the older writer's rows look like
        runs = QueryRun.__table__
        conn.execute(sa.update(runs).where(runs.c.run_id == RUN).values(last_batch_id=1))
        conn.execute(sa.update(runs).where(runs.c.run_id == OTHER_RUN).values(
            first_batch_id=None, last_batch_id=None, last_progress_at=None))
    with engine.begin() as conn:
        recompute(conn, at(10), 3600)
    assert {run: bounds(history_url, run) for run in (RUN, OTHER_RUN)} == truth
    with engine.begin() as conn:  # nothing short any more: nothing written
        assert widen_from_recent(conn, at(-60)) == 0
