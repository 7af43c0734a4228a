"""The raw per-batch tables are partitioned by day on PostgreSQL.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

A platform with a few hundred streaming queries writes hundreds of millions of operator rows a
month. On one table each, retention deleted them row by row (hours of DELETE, then bloat) and
every time-range read walked one ever-growing index. Now ``batches``, ``operator_batches``,
``source_batches`` and ``sink_batches`` are ``PARTITION BY RANGE (timestamp)`` with one partition
per UTC day (``<table>_pYYYYMMDD``) and a DEFAULT partition (``<table>_default``) that catches a
write to a day nobody created yet; retention drops whole days (``sparkwatch.history.partitions``).

PostgreSQL requires every unique key of a partitioned table to contain the partition key, so the
primary keys gain ``timestamp`` (a batch is reported with one timestamp, so a replayed event still
finds its row and writes stay idempotent; only a batch id reported twice by one run with two
timestamps, which Spark does not do, would now be kept twice), and the operator/source/sink rows lose their foreign key to ``batches``
(a key to a partitioned parent would make each day's DROP check every child row; a batch and its
children are written in one transaction and dropped one day at a time, together). ``batches``
keeps its foreign key to ``query_runs``.

Upgrade, in place and in one transaction, for each table: the old table is renamed aside and
stripped of its constraints and indexes (their definitions are kept), the partitioned table is
created with the same columns (``LIKE``), partitions are created for every day holding rows and
for the next days, the rows are copied over (``INSERT ... SELECT``: about as long as the rows take
to write again, plus the index builds), then the keys and the same indexes are built and the old
table is dropped. It needs the history's size again in free disk while it runs and blocks writers
until it commits (the writers retry).

Downgrade: the reverse (one plain table each, rows copied back, the old keys and foreign keys).

SQLite: nothing changes (one table each, as before).

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Each table's key before 0010; after it, the same plus ``timestamp``.
KEYS = {
    "batches": ("run_id", "batch_id"),
    "operator_batches": ("run_id", "batch_id", "operator_index"),
    "source_batches": ("run_id", "batch_id", "source_index"),
    "sink_batches": ("run_id", "batch_id"),
}
CHILDREN = ("operator_batches", "source_batches", "sink_batches")
RUN_FK = ("fk_batches_run_id_query_runs",
          "FOREIGN KEY (run_id) REFERENCES query_runs (run_id) ON DELETE CASCADE")
DAYS_AHEAD = 3
DAY = timedelta(days=1)


def _batch_fk(table: str) -> tuple[str, str]:
    return (f"fk_{table}_run_id_batches",
            "FOREIGN KEY (run_id, batch_id) REFERENCES batches (run_id, batch_id) "
            "ON DELETE CASCADE")


def _set_aside(conn: sa.Connection, table: str) -> list[str]:
    """Rename ``table`` to ``<table>_old`` without its constraints and indexes, whose names the
    new table takes; returns the indexes' definitions (to build on the new table)."""
    indexes = list(conn.execute(sa.text(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = to_regclass(:t) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid) ORDER BY 1"),
        {"t": table}))
    constraints = conn.execute(sa.text(
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(:t) "
        "AND contype IN ('p', 'f', 'u') ORDER BY contype"), {"t": table}).scalars().all()
    for name in constraints:
        op.execute(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"')
    for name, _ in indexes:
        op.execute(f'DROP INDEX "{name}"')
    op.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
    return [definition for _, definition in indexes]


def _day(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _days_of(conn: sa.Connection, table: str) -> list[datetime]:
    """Every day from the table's first row to its last (its timestamp index answers), then
    today and the next days."""
    # nosec B608 below: identifiers are this migration's own table names, no input.
    span = f"SELECT min(timestamp), max(timestamp) FROM {table}"  # nosec B608
    first, last = conn.execute(sa.text(span)).one()
    wanted = {_day(datetime.now(UTC)) + n * DAY for n in range(DAYS_AHEAD + 1)}
    day = _day(first) if first is not None else None
    while day is not None and day <= last:
        wanted.add(day)
        day += DAY
    return sorted(wanted)


def _partitioned(conn: sa.Connection, table: str) -> None:
    days = _days_of(conn, table)
    indexes = _set_aside(conn, table)
    op.execute(f"CREATE TABLE {table} (LIKE {table}_old INCLUDING DEFAULTS INCLUDING STORAGE) "
               'PARTITION BY RANGE ("timestamp")')
    op.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
    for day in days:
        op.execute(f"CREATE TABLE {table}_p{day:%Y%m%d} PARTITION OF {table} FOR VALUES "
                   f"FROM ('{day.isoformat()}') TO ('{(day + DAY).isoformat()}')")
    op.execute(f"INSERT INTO {table} SELECT * FROM {table}_old")  # nosec B608
    op.execute(f"DROP TABLE {table}_old")
    key = ", ".join((*KEYS[table], '"timestamp"'))
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} PRIMARY KEY ({key})")
    for definition in indexes:
        op.execute(definition)


def _plain(conn: sa.Connection, table: str) -> None:
    indexes = _set_aside(conn, table)
    op.execute(f"CREATE TABLE {table} (LIKE {table}_old INCLUDING DEFAULTS INCLUDING STORAGE)")
    op.execute(f"INSERT INTO {table} SELECT * FROM {table}_old")  # nosec B608
    op.execute(f"DROP TABLE {table}_old")  # the partitions go with it
    op.execute(f"ALTER TABLE {table} ADD CONSTRAINT pk_{table} "
               f"PRIMARY KEY ({', '.join(KEYS[table])})")
    for definition in indexes:
        # The partitioned parent's indexes read "ON ONLY"; a plain table has no partitions.
        op.execute(definition.replace(" ON ONLY ", " ON "))


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    # Children first: their foreign keys to batches hold batches' primary key.
    for table in (*CHILDREN, "batches"):
        _partitioned(conn, table)
    name, definition = RUN_FK
    op.execute(f'ALTER TABLE batches ADD CONSTRAINT "{name}" {definition}')


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "postgresql":
        return
    for table in KEYS:
        _plain(conn, table)
    for name, definition in (RUN_FK, *(_batch_fk(t) for t in CHILDREN)):
        table = "batches" if name == RUN_FK[0] else name.split("_run_id")[0][3:]
        op.execute(f'ALTER TABLE {table} ADD CONSTRAINT "{name}" {definition}')
