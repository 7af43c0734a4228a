"""Which schema revision a database holds, read without Alembic (readers stay light and quiet)."""

from __future__ import annotations

import sqlalchemy as sa

from sparkwatch.history.engine import describe_url
from sparkwatch.history.errors import UPGRADE_HINT, SchemaNotMigrated
from sparkwatch.history.schema import SCHEMA_REVISION, VERSION_TABLE, QueryRun


def current_of(conn: sa.Connection) -> str | None:
    """The database's revision, None when it has no history schema."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    version = sa.table(VERSION_TABLE, sa.column("version_num", sa.String()))
    return conn.execute(sa.select(version.c.version_num)).scalars().first()


def holds_history(conn: sa.Connection) -> bool:
    """Whether the database has the history's tables at all (an empty database, a new SQLite
    file, a mistyped URL: not), whatever their revision."""
    return sa.inspect(conn).has_table(QueryRun.__tablename__)


def check_schema(conn: sa.Connection) -> None:
    """Raise :class:`SchemaNotMigrated` unless the database has the schema the models describe."""
    revision = current_of(conn)
    if revision == SCHEMA_REVISION:
        return
    where = describe_url(conn.engine.url)
    if revision is None:
        raise SchemaNotMigrated(f"{where} has no sparkwatch history schema: {UPGRADE_HINT}")
    if is_older(revision):
        raise SchemaNotMigrated(f"{where} has history schema {revision}, this sparkwatch reads "
                                f"{SCHEMA_REVISION}: {UPGRADE_HINT}")
    # `db upgrade` refuses a newer schema: advising it here sent the reader round in circles.
    raise SchemaNotMigrated(
        f"{where} has history schema {revision}, newer than this sparkwatch's "
        f"{SCHEMA_REVISION} (or not one of ours): upgrade sparkwatch"
    )


def is_older(revision: str) -> bool:
    """Whether ``revision`` is one this sparkwatch's migrations go past: they are numbered
    0001, 0002, ... up to :data:`SCHEMA_REVISION` (tests/test_migrations.py holds them to it)."""
    return len(revision) == len(SCHEMA_REVISION) and revision.isdigit() \
        and revision < SCHEMA_REVISION
