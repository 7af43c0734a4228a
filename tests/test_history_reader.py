"""The reader's queries over a populated history, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from sparkwatch.history import migrate
from sparkwatch.history.errors import (
    HistoryUnavailable,
    SchemaNotMigrated,
    UnknownOperator,
    UnknownQuery,
)
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.views import to_dict
from sparkwatch.model.events import ParsedEvent
from tests.test_history_support import (
    batch_of,
    load_sample,
    migrated_database,
    progress,
    started,
    terminated,
    utc,
    write,
)

AGG = load_sample("window_agg")
JOIN = load_sample("stream_stream_join_rocksdb")
QUERY = AGG["id"]
OLD_RUN, NEW_RUN = "00000000-0000-4000-8000-000000000001", AGG["runId"]
DUP_IDS = ("d0000000-0000-4000-8000-00000000000a", "d0000000-0000-4000-8000-00000000000b")


def _agg_batch(run_id: str, batch_id: int, minute: int, rows_total: int) -> dict:
    raw = batch_of(AGG, batch_id, f"2026-11-21T09:{minute:02d}:00.000Z", runId=run_id)
    raw["stateOperators"] = [{**raw["stateOperators"][0], "numRowsTotal": rows_total}]
    return raw


def agg_runs_and_join(old: list[ParsedEvent], new: list[ParsedEvent]) -> list[ParsedEvent]:
    """window_agg: a run that failed after the ``old`` batches, then a running one with the
    ``new`` batches; and the join's one batch."""
    return [
        started(QUERY, OLD_RUN, "window_agg", "2026-11-21T08:59:00.000Z"),
        *old,
        terminated(QUERY, OLD_RUN, "2026-11-21T09:03:00.000Z", "boom\n\tat X", "STREAM_FAILED"),
        started(QUERY, NEW_RUN, "window_agg", "2026-11-21T09:09:00.000Z"),
        *new,
        progress(JOIN),
    ]


def populate(url: str) -> None:
    """window_agg: a failed run (batches 0-2) then a running one (3-5); a join attached late;
    two queries sharing the name "dup"."""
    old = [progress(_agg_batch(OLD_RUN, b, b, 10 * (b + 1))) for b in range(3)]
    new = [progress(_agg_batch(NEW_RUN, b, 10 + b, 10 * (b + 1))) for b in range(3, 6)]
    dups = [
        progress(batch_of(JOIN, 1, "2026-11-21T08:00:00.000Z", id=qid, runId=qid, name="dup"))
        for qid in DUP_IDS
    ]
    write(url, *agg_runs_and_join(old, new), *dups)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def populated(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a history :func:`populate` wrote."""
    for url in migrated_database(request):
        populate(url)
        yield url


@pytest.fixture(scope="module")
def reader(populated: str) -> Iterator[HistoryReader]:
    with HistoryReader(populated) as history:
        yield history


def test_queries_lists_each_query_with_its_latest_run(reader: HistoryReader) -> None:
    by_id = {q.query_id: q for q in reader.queries()}
    assert set(by_id) == {QUERY, JOIN["id"], *DUP_IDS}
    agg = by_id[QUERY]
    assert (agg.name, agg.latest_run_id, agg.status) == ("window_agg", NEW_RUN, "running")
    assert (agg.runs, agg.batches, agg.last_batch_id) == (2, 6, 5)
    assert agg.started_at == utc("2026-11-21T09:09:00.000Z")
    assert agg.last_progress_at == utc("2026-11-21T09:15:00.000Z")
    join = by_id[JOIN["id"]]
    assert (join.runs, join.batches, join.started_at, join.app_name) == (1, 1, None, "orders-etl")


def test_queries_are_ordered_most_recently_active_first(reader: HistoryReader) -> None:
    times = [q.last_event_at for q in reader.queries()]
    assert times == sorted(times, reverse=True)


def test_queries_and_runs_page_in_the_database(reader: HistoryReader) -> None:
    """A page (the read API's) is the same slice of the same rows as the whole list."""
    everything = reader.queries()
    assert reader.queries(limit=2, offset=1) == everything[1:3]
    assert reader.queries(limit=100) == everything
    assert reader.runs("window_agg", limit=1, offset=1) == reader.runs("window_agg")[1:]


def test_runs_of_a_query_latest_first(reader: HistoryReader) -> None:
    new, old = reader.runs("window_agg")
    assert (new.run_id, new.status, new.batches, new.first_batch_id, new.last_batch_id) == (
        NEW_RUN, "running", 3, 3, 5,
    )
    assert (old.run_id, old.status, old.batches, old.first_batch_id, old.last_batch_id) == (
        OLD_RUN, "failed", 3, 0, 2,
    )
    assert old.ended_at == utc("2026-11-21T09:03:00.000Z")
    assert (old.exception, old.error_class) == ("boom\n\tat X", "STREAM_FAILED")


def test_a_query_is_found_by_id_name_or_unique_id_prefix(reader: HistoryReader) -> None:
    assert reader.resolve_query(QUERY) == QUERY
    assert reader.resolve_query("window_agg") == QUERY
    assert reader.resolve_query(QUERY[:8]) == QUERY


def test_a_name_shared_by_several_queries_means_the_latest_and_says_so(
    reader: HistoryReader,
) -> None:
    reader.notes.clear()
    assert reader.resolve_query("dup") == DUP_IDS[1]  # same last event: the id breaks the tie
    assert reader.notes == [
        f"name 'dup' matches 2 queries; showing the most recently active, {DUP_IDS[1]} "
        f"(others: {DUP_IDS[0]}; pass an id to choose)"]


def test_unknown_queries_are_errors(reader: HistoryReader) -> None:
    with pytest.raises(UnknownQuery, match="no query with id or name 'nope'"):
        reader.runs("nope")

def test_a_prefix_of_several_ids_is_refused_naming_them(reader: HistoryReader) -> None:
    with pytest.raises(UnknownQuery) as refused:
        reader.runs("d0000000")
    assert refused.value.message == (
        f"'d0000000' is the start of the ids of more than one query ({', '.join(DUP_IDS)})")
    assert str(refused.value).endswith("(give more of the id, or the name)")


def test_state_defaults_to_the_newest_points_oldest_first(reader: HistoryReader) -> None:
    points = reader.state("window_agg", limit=4)
    assert [(p.batch_id, p.num_rows_total) for p in points] == [(2, 30), (3, 40), (4, 50), (5, 60)]
    assert {p.operator_name for p in points} == {"stateStoreSave"}
    assert points[-1].custom_metrics == AGG["stateOperators"][0]["customMetrics"]


def test_state_pages_forward_from_since(reader: HistoryReader) -> None:
    since = utc("2026-11-21T09:01:00.000Z")
    first = reader.state(QUERY, since=since, limit=2)
    second = reader.state(QUERY, since=since, limit=2, offset=2)
    assert [p.batch_id for p in first + second] == [1, 2, 3, 4]


def test_state_within_a_time_range(reader: HistoryReader) -> None:
    start, batch_3 = utc("2026-11-21T09:02:00.000Z"), utc("2026-11-21T09:13:00.000Z")
    points = reader.state(QUERY, operator=0, since=start, until=batch_3 + timedelta(seconds=1))
    assert [p.batch_id for p in points] == [2, 3]
    assert [p.batch_id for p in reader.state(QUERY, since=start, until=batch_3)] == [2]
    older = reader.state(QUERY, until=utc("2026-11-21T09:01:00.000Z"))
    assert [p.batch_id for p in older] == [0]


def test_state_of_an_operator_that_does_not_exist_is_an_error(reader: HistoryReader) -> None:
    expected = r"no state operator 3 \(operators: 0 stateStoreSave\)"
    with pytest.raises(UnknownOperator, match=expected):
        reader.state("window_agg", operator=3)


def test_views_become_plain_json(reader: HistoryReader) -> None:
    [point] = reader.state("window_agg", limit=1)
    data = json.loads(json.dumps(to_dict(point)))
    assert data["timestamp"] == "2026-11-21T09:15:00Z"
    assert data["num_rows_total"] == 60


def test_reading_a_database_without_the_schema_asks_to_migrate(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url)
    migrate.downgrade(sqlite_url, "base")
    with HistoryReader(sqlite_url) as history, pytest.raises(SchemaNotMigrated, match="db upgrade"):
        history.queries()


@pytest.mark.parametrize("url", ["sqlite:///{}", "sqlite:///file:{}?uri=true"])
def test_reading_a_missing_sqlite_file_does_not_create_it(url: str, tmp_path) -> None:
    with pytest.raises(HistoryUnavailable, match="no history database"):
        HistoryReader(url.format(tmp_path / "absent.db"))
    assert not (tmp_path / "absent.db").exists()


@pytest.mark.parametrize("url", ["sqlite:///file::memory:?uri=true",
                                 "sqlite:///file::memory:?cache=shared&uri=true"])
def test_an_in_memory_uri_is_not_a_missing_file(url: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with HistoryReader(url) as history, pytest.raises(SchemaNotMigrated):
        history.queries()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
def test_times_at_the_ends_of_the_calendar_read_back_whatever_the_servers_time_zone(
        pg_url: str) -> None:
    """A database whose time zone is not UTC (ALTER DATABASE ... SET timezone): the driver read
    timestamps back in that zone, and an accepted watermark of 9999-12-31T23:59:59.999Z became
    year 10000 in Tokyo (reads failed); the engine's sessions are UTC."""
    import sqlalchemy as sa

    from sparkwatch.history.engine import create_engine

    admin = sa.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        name = sa.engine.make_url(pg_url).database
        conn.execute(sa.text(f'ALTER DATABASE "{name}" SET timezone = \'Asia/Tokyo\''))
    admin.dispose()
    migrate.upgrade(pg_url)
    raw = load_sample("window_agg")
    last = batch_of(raw, 1, "2026-11-21T09:33:50.000Z")
    last["eventTime"] = {"watermark": "9999-12-31T23:59:59.999Z"}
    write(pg_url, started(QUERY, NEW_RUN, "window_agg", "2026-11-21T09:33:00.000Z"),
          progress({**last, "id": QUERY, "runId": NEW_RUN}))
    from sparkwatch.history.schema import Batch

    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            [watermark] = conn.execute(sa.select(Batch.__table__.c.watermark)).scalars()
            assert conn.execute(sa.text("SHOW timezone")).scalar() == "UTC"
    finally:
        engine.dispose()
    assert (watermark.year, watermark.month, watermark.day) == (9999, 12, 31)


def test_a_reader_that_keeps_no_notes_holds_none_however_often_a_name_is_ambiguous(
        populated: str) -> None:
    with HistoryReader(populated, keep_notes=False) as history:
        for _ in range(100):
            assert history.resolve_query("dup") == DUP_IDS[1]
            assert history.runs("dup", limit=1)[0].query_id == DUP_IDS[1]
        assert history.notes == []


def test_the_collectors_long_lived_reads_keep_no_note_of_the_names_they_resolve(
        populated: str) -> None:
    """Every tenant's reads go through one reader for the collector's life: a note per
    ambiguous name grew without bound and held every tenant's query ids."""
    from sparkwatch.collector.reads import Reads

    reads = Reads(populated)
    try:
        for _ in range(1000):
            assert reads.resolve("dup") == DUP_IDS[1]
        reader, _ = reads._ready()
        assert reader.notes == []
    finally:
        reads.close()


def test_a_query_named_past_the_name_limit_is_found_by_the_name_it_was_given(
    history_url: str,
) -> None:
    """The history keeps a name cut to 256 characters, as every event carries it: the name as
    given in Spark found nothing, and past 50,000 characters SQLite refused the id-prefix LIKE
    ('LIKE or GLOB pattern too complex')."""
    from sparkwatch.model.contract import LIMITS
    from sparkwatch.model.events import AppInfo, EventKind
    from sparkwatch.model.parse import listener_event

    migrate.upgrade(history_url)
    app = AppInfo("app", "app-1", "4.3.0")
    names = {"C" * 300 + "A": "c0000000-0000-4000-8000-00000000000c",
             "M" * 99_999 + "é": "e0000000-0000-4000-8000-00000000000e"}
    write(history_url, *(listener_event(EventKind.STARTED, json.dumps(
        {"id": query_id, "runId": query_id, "name": name, "timestamp": "2026-11-21T08:00:00Z"}),
        app, 1_795_000_000.0) for name, query_id in names.items()))
    with HistoryReader(history_url) as history:
        for name, query_id in names.items():
            assert history.resolve_query(name) == query_id
            [run] = history.runs(name)
            assert len(run.name) == LIMITS.name_chars and name.startswith(run.name[:-1])
        with pytest.raises(UnknownQuery) as refused:
            history.runs("Z" * 100_000)
    assert len(refused.value.message) < 300, len(refused.value.message)
