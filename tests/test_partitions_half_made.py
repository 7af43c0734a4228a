"""A day's partitions left half made (PostgreSQL): a day's table there but not attached, without
its indexes, or the DEFAULT partition detached, as a creation cut short outside one transaction
(a process killed between two statements, an operator's hand) leaves them, or the DEFAULT
partition dropped outright. Every creation pass (the retention job's, a writer's) finishes them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from sparkwatch.collector.retention import Retention
from sparkwatch.history import migrate, partitions
from tests.test_collector_jobs import progress_at, write
from tests.test_collector_support import fresh_ids, scalar

TABLES = partitions.TABLES


def execute(url: str, *statements: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(sa.text(statement))
    finally:
        engine.dispose()


def retention(url: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            Retention(raw_days=7, rollup_days=30).in_chunks(conn, datetime.now(UTC))
            conn.commit()
    finally:
        engine.dispose()


def parent_of(url: str, table: str) -> str | None:
    return scalar(url, "SELECT inhparent::regclass::text FROM pg_inherits "
                       "WHERE inhrelid = to_regclass(:t)", t=table)


def indexes(url: str, table: str) -> int:
    return int(scalar(url, "SELECT count(*) FROM pg_index WHERE indrelid = to_regclass(:t)",
                      t=table))


def held_in(url: str, run_id: str) -> str:
    return str(scalar(url, "SELECT tableoid::regclass::text FROM batches WHERE run_id = :r",
                      r=run_id))


def test_a_days_table_made_but_not_attached_is_attached_with_its_indexes_at_the_next_pass(
    pg_url: str,
) -> None:
    migrate.upgrade(pg_url)
    today = partitions.day_of(datetime.now(UTC))
    day = today + partitions.DAY
    made = {t: partitions.partition_name(t, day) for t in TABLES}
    execute(pg_url, *[f"DROP TABLE {name}" for name in made.values()],
            *[f"CREATE TABLE {name} (LIKE {t} INCLUDING DEFAULTS)" for t, name in made.items()])
    retention(pg_url)
    for table, name in made.items():
        assert parent_of(pg_url, name) == table
        assert indexes(pg_url, name) == indexes(pg_url, partitions.partition_name(table, today))
    ids = fresh_ids()
    write(pg_url, progress_at([day + timedelta(hours=1)], **ids))
    assert held_in(pg_url, ids["run_id"]) == made["batches"]


def test_a_detached_default_partition_is_attached_again_at_the_next_pass(pg_url: str) -> None:
    migrate.upgrade(pg_url)
    far = datetime.now(UTC) + timedelta(days=10)  # a day nobody makes a partition for
    waiting = fresh_ids()
    write(pg_url, progress_at([far], **waiting))
    execute(pg_url, *[f"ALTER TABLE {t} DETACH PARTITION {partitions.default_name(t)}"
                      for t in TABLES])
    retention(pg_url)
    for table in TABLES:
        assert parent_of(pg_url, partitions.default_name(table)) == table
    assert held_in(pg_url, waiting["run_id"]) == "batches_default"
    ids = fresh_ids()
    write(pg_url, progress_at([far + timedelta(minutes=1)], **ids))
    assert held_in(pg_url, ids["run_id"]) == "batches_default"


def drop_defaults(url: str) -> None:
    execute(url, *[f"DROP TABLE {partitions.default_name(t)}" for t in TABLES])


def test_a_dropped_default_partition_is_made_again_by_the_retention_job(pg_url: str) -> None:
    migrate.upgrade(pg_url)
    drop_defaults(pg_url)
    retention(pg_url)
    for table in TABLES:
        assert parent_of(pg_url, partitions.default_name(table)) == table
    ids = fresh_ids()
    write(pg_url, progress_at([datetime.now(UTC) + timedelta(days=10)], **ids))
    assert held_in(pg_url, ids["run_id"]) == "batches_default"


def test_a_dropped_default_partition_is_made_again_by_a_writers_first_write(pg_url: str) -> None:
    migrate.upgrade(pg_url)
    drop_defaults(pg_url)
    ids = fresh_ids()
    # A day nobody makes a partition for: its rows have no other place than DEFAULT.
    write(pg_url, progress_at([datetime.now(UTC) + timedelta(days=10)], **ids))
    assert held_in(pg_url, ids["run_id"]) == "batches_default"
    for table in TABLES:
        assert parent_of(pg_url, partitions.default_name(table)) == table
