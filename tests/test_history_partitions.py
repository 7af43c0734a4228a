"""The partitioned history on PostgreSQL (migration 0010): a populated history converts in place
and back without losing or changing a row, retention drops whole days and creates the next ones,
and a write to a day nobody created still succeeds (DEFAULT partition) and is moved into its day
later. SQLite keeps one table each."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from sparkwatch.collector.retention import Retention
from sparkwatch.history import migrate, partitions, rollups
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.schema import SCHEMA_REVISION
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from tests.test_collector_jobs import APP, progress_at
from tests.test_collector_support import fresh_ids, recorded, scalar
from tests.test_dashboards_support import sql_for_test, variable_queries
from tests.test_history_support import TABLES

NOW = datetime.now(UTC).replace(microsecond=0)
HISTORY_BOARD = (Path(__file__).resolve().parents[1] / "dashboards" / "generated" / "grafana"
                 / "sparkwatch-history.json")
PARTITIONED = ("batches", "operator_batches", "source_batches", "sink_batches")


def write(url: str, payloads: list[dict[str, Any]], migrate_first: bool = True) -> None:
    writer = HistoryWriter(url, migrate=migrate_first)
    try:
        writer.write([parse_envelope(Envelope(EventKind.PROGRESS, APP, NOW.timestamp(), p))
                      for p in payloads])
    finally:
        writer.close()


def table_counts(url: str) -> dict[str, int]:
    return {t: int(scalar(url, f"select count(*) from {t}")) for t in TABLES}


def relkind(url: str, table: str) -> str:
    return str(scalar(url, "select relkind from pg_class where oid = to_regclass(:t)", t=table))


def exists(url: str, table: str) -> bool:
    return scalar(url, "select to_regclass(:t)", t=table) is not None


# query_runs' columns of migration 0013 (the runs' batch bounds, filled in from the batches by
# its upgrade): left out, so that rows dumped before 0010 compare with rows dumped at head.
RUN_BOUNDS = ("first_batch_id", "last_batch_id", "last_progress_at")


def dump(url: str) -> dict[str, list[Any]]:
    """Every row of every history table, in key order (JSON maps as text), but for the
    columns of :data:`RUN_BOUNDS`."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: [tuple(str(v) for k, v in r._mapping.items() if k not in RUN_BOUNDS)
                        for r in conn.execute(sa.text(f"SELECT * FROM {t} ORDER BY 1, 2, 3"))]
                    for t in TABLES}
    finally:
        engine.dispose()


def reads(url: str, query_ids: list[str]) -> list[Any]:
    """What the read API and `sparkwatch history` show of these queries."""
    with HistoryReader(url) as reader:
        out: list[Any] = [reader.queries(), reader.statuses()]
        for query_id in query_ids:
            out += [reader.runs(query_id), reader.state(query_id),
                    reader.state(query_id, 0, since=NOW - timedelta(days=3))]
        return out


def populate(url: str, ages_days: list[float], queries: int = 2,
             migrate_first: bool = True) -> list[str]:
    ids = []
    for _ in range(queries):
        run = fresh_ids()
        write(url, progress_at([NOW - timedelta(days=d) for d in ages_days], **run),
              migrate_first)
        ids.append(run["query_id"])
    return ids


def day_partition(table: str, days_ago: float) -> str:
    return partitions.partition_name(table, partitions.day_of(NOW - timedelta(days=days_ago)))


def test_a_populated_history_is_partitioned_in_place_and_back_without_changing_a_row(
        pg_url: str) -> None:
    # Written at head (the writer writes the newest run columns: 0013's), taken back to 0009.
    migrate.upgrade(pg_url)
    query_ids = populate(pg_url, [12, 5.5, 5.4, 2, 1, 0.01], migrate_first=False)
    migrate.downgrade(pg_url, "0009")
    assert relkind(pg_url, "batches") == "r"
    before_counts, before_rows = table_counts(pg_url), dump(pg_url)
    assert before_counts["operator_batches"] == 2 * 6 * len(
        recorded()["progress"][0]["stateOperators"])

    migrate.upgrade(pg_url)
    assert migrate.current(pg_url) == SCHEMA_REVISION
    assert table_counts(pg_url) == before_counts
    assert dump(pg_url) == before_rows
    before_reads = reads(pg_url, query_ids)
    assert len(before_reads[2]) == 1 and len(before_reads[3]) == 6
    for table in PARTITIONED:
        assert relkind(pg_url, table) == "p"
        assert int(scalar(pg_url, f"select count(*) from {table}_default")) == 0
        for age in (12, 5.5, 1, -partitions.DAYS_AHEAD):
            assert exists(pg_url, day_partition(table, age)), (table, age)
    assert int(scalar(pg_url, f"select count(*) from {day_partition('batches', 12)}")) == 2

    migrate.downgrade(pg_url, "0009")
    assert relkind(pg_url, "batches") == "r"
    assert not exists(pg_url, "batches_default")
    assert table_counts(pg_url) == before_counts
    assert dump(pg_url) == before_rows

    migrate.upgrade(pg_url)
    assert table_counts(pg_url) == before_counts
    assert reads(pg_url, query_ids) == before_reads
    # Writes after the upgrade are idempotent as before: the same events again add nothing.
    write(pg_url, progress_at([NOW - timedelta(days=12)], query_id=query_ids[0],
                              run_id=reads(pg_url, query_ids)[2][0].run_id))
    assert table_counts(pg_url) == before_counts


def test_retention_drops_whole_days_and_creates_the_next_ones(pg_url: str) -> None:
    populate(pg_url, [10, 8.5, 8.2, 3, 0.01], queries=1)
    ops = len(recorded()["progress"][0]["stateOperators"])
    engine = sa.create_engine(pg_url)
    later = NOW + timedelta(days=2)
    try:
        with engine.begin() as conn:
            removed = Retention(raw_days=7, rollup_days=90)(conn, later)
    finally:
        engine.dispose()
    # 10 and 8.x days before NOW are 12 and 10.x days before `later`: whole days past 7.
    assert removed["batches"] == 3 and removed["operator_batches"] == 3 * ops
    for table in PARTITIONED:
        assert not exists(pg_url, day_partition(table, 10))
        assert not exists(pg_url, day_partition(table, 8.5))
        assert exists(pg_url, day_partition(table, 3))
        for ahead in range(partitions.DAYS_AHEAD + 1):
            assert exists(pg_url, day_partition(table, -2 - ahead)), (table, ahead)
    assert table_counts(pg_url)["batches"] == 2
    assert table_counts(pg_url)["operator_batches"] == 2 * ops
    assert int(scalar(pg_url, "select batches from query_runs")) == 2, "the run's count follows"


def test_a_write_to_a_day_without_a_partition_succeeds_and_is_moved_into_its_day(
        pg_url: str) -> None:
    migrate.upgrade(pg_url)
    old = NOW - timedelta(days=20)  # no partition: before the history existed
    assert not exists(pg_url, day_partition("batches", 20))
    populate(pg_url, [20, 0.01], queries=1)
    assert int(scalar(pg_url, "select count(*) from batches_default")) == 1
    assert int(scalar(pg_url, "select count(*) from operator_batches_default")) > 0

    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            Retention(raw_days=30, rollup_days=90)(conn, NOW)
    finally:
        engine.dispose()
    for table in PARTITIONED:
        assert int(scalar(pg_url, f"select count(*) from {table}_default")) == 0, table
    moved = day_partition("batches", 20)
    assert int(scalar(pg_url, f"select count(*) from {moved}")) == 1
    assert scalar(pg_url, f"select timestamp from {moved}") == old.replace(microsecond=0)
    assert table_counts(pg_url)["batches"] == 2


def test_sqlite_keeps_one_table_each(sqlite_url: str) -> None:
    populate(sqlite_url, [10, 0.01], queries=1)
    engine = sa.create_engine(sqlite_url)
    try:
        names = set(sa.inspect(engine).get_table_names())
        with engine.begin() as conn:
            assert not partitions.is_partitioned(conn)
            assert partitions.ensure_ahead(conn, NOW) == 0
            removed = Retention(raw_days=7, rollup_days=90)(conn, NOW)
    finally:
        engine.dispose()
    assert not any(partitions.is_partition_name(n) for n in names)
    assert removed["batches"] == 1


def test_the_writer_creates_the_days_of_its_batches_ahead(pg_url: str) -> None:
    """Without a collector the listener's writer is the only one to create partitions."""
    populate(pg_url, [-2], queries=1)  # a driver clock 2 days ahead: days past the migration's
    for table in PARTITIONED:
        for day in range(2, 2 + partitions.DAYS_AHEAD + 1):
            assert exists(pg_url, day_partition(table, -day)), (table, day)
        assert int(scalar(pg_url, f"select count(*) from {table}_default")) == 0, table
    assert int(scalar(pg_url, f"select count(*) from {day_partition('batches', -2)}")) == 1


def test_batches_of_far_off_days_wait_in_default_and_make_no_tables(pg_url: str) -> None:
    """Batch times a pusher chose (60 days, years ahead, decades back): every row is stored,
    in DEFAULT, and neither the writer nor retention's partition upkeep makes a table for them,
    where each distinct day made four (one request could name 5,000 days)."""
    migrate.upgrade(pg_url)
    engine = sa.create_engine(pg_url)
    try:
        # The migration made its days from the wall clock; NOW was read when this module was
        # imported, and a run that crosses midnight between the two would see NOW's day made here.
        with engine.begin() as conn:
            partitions.ensure_ahead(conn, NOW)
    finally:
        engine.dispose()
    ages = [-400 - 30 * i for i in range(30)] + [4000 + 30 * i for i in range(30)]
    before = partition_count(pg_url)
    populate(pg_url, ages, queries=1)
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            Retention(raw_days=365 * 40, rollup_days=365 * 40)(conn, NOW)
    finally:
        engine.dispose()
    assert partition_count(pg_url) == before
    assert int(scalar(pg_url, "select count(*) from batches_default")) == len(ages)
    assert table_counts(pg_url)["batches"] == len(ages)


def partition_count(url: str) -> int:
    return int(scalar(url, "select count(*) from pg_inherits i join pg_class c "
                           "on c.oid = i.inhrelid where c.relkind = 'r'"))


def test_the_history_dashboards_operator_variable_names_the_latest_batchs_operators(
        pg_url: str) -> None:
    """The variable looks in the day before the run's last event first, then in the whole run:
    both ways give the operators of the run's latest batch."""
    board = json.loads(HISTORY_BOARD.read_text())
    (query,) = [q for name, q in variable_queries(board) if name == "operator"]
    populate(pg_url, [3, 2], queries=1)
    expected = str(scalar(pg_url, "select string_agg(distinct operator_name, ',' order by "
                                  "operator_name) from operator_batches"))

    def operators() -> str:
        chosen = {"app": [str(scalar(pg_url, "select app_name from query_runs"))],
                  "query": [str(scalar(pg_url, "select coalesce(name, query_id) from query_runs"))]}
        engine = sa.create_engine(pg_url)
        try:
            with engine.connect() as conn:
                rows = conn.execute(sa.text(sql_for_test(query, chosen, NOW, NOW)))
                return ",".join(str(r[0]) for r in rows)
        finally:
            engine.dispose()

    assert expected and operators() == expected
    # Idle events for days after the last batch: the day before them holds no batch.
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text(
            "UPDATE query_runs SET last_event_at = last_event_at + interval '5 days'"))
    engine.dispose()
    assert operators() == expected


def test_rollups_read_only_the_partitions_their_window_overlaps(pg_url: str) -> None:
    """Each rollup tick recomputes the buckets of its lookback window, so a closed day's partition
    is aggregated while it is recent and never scanned again: the planner prunes every other day
    (the DEFAULT partition stays in the plan, as it may hold rows of any day)."""
    populate(pg_url, [10, 5, 2, 0.01], queries=1)
    engine = sa.create_engine(pg_url)
    since = rollups.bucket_floor(NOW - timedelta(seconds=rollups.LOOKBACK_SECONDS), 3600)
    statements = {"batches": rollups.query_aggregates("postgresql", 3600, since),
                  "operator_batches": rollups.operator_aggregates("postgresql", 3600, since)}
    try:
        with engine.connect() as conn:
            for table, stmt in statements.items():
                sql = stmt.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
                plan = "\n".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN {sql}"))
                scanned = set(re.findall(rf" on ({table}_(?:p\d{{8}}|default))\b", plan))
                # From the window's first day on: today and the days created ahead (empty).
                # The migration made its days ahead from the wall clock, maybe a day past NOW.
                ahead = datetime.now(UTC) + timedelta(days=partitions.DAYS_AHEAD + 1)
                recent = {partitions.partition_name(table, day)
                          for day in partitions.days(since, ahead)}
                assert scanned <= recent | {partitions.default_name(table)}, plan
                assert day_partition(table, 0.01) in scanned, plan
                for old in (10, 5, 2):
                    assert day_partition(table, old) not in scanned, plan
    finally:
        engine.dispose()
