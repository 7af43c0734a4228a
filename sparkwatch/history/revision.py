"""Which schema revision a database holds, read without Alembic (readers stay light and quiet)."""

from __future__ import annotations

import sqlalchemy as sa

from sparkwatch.history.engine import describe_url
from sparkwatch.history.errors import UPGRADE_HINT, MigrationError, SchemaNotMigrated
from sparkwatch.history.schema import SCHEMA_REVISION, VERSION_TABLE, QueryRun


class RevisionUnknown(MigrationError):
    """The version table does not say one revision of a database that has the history's tables
    (emptied or filled by hand): no migration can start from it, and none is tried."""

    public = "the history cannot be read: its schema revision is not recorded consistently"


def recorded_revisions(conn: sa.Connection) -> list[str] | None:
    """Every revision the version table holds, sorted; None without a version table."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    version = sa.table(VERSION_TABLE, sa.column("version_num", sa.String()))
    return sorted(conn.execute(sa.select(version.c.version_num)).scalars())


def current_of(conn: sa.Connection) -> str | None:
    """The database's revision, None when it has no history schema. Raises
    :class:`RevisionUnknown` when its version table holds several revisions, or none while the
    history's tables exist: Alembic took the first row for the revision, or base, and a command
    then claimed to be at a revision it was not, or failed midway re-creating a table."""
    revisions = recorded_revisions(conn) or []
    if len(revisions) == 1:
        return revisions[0]
    where = describe_url(conn.engine.url)
    if revisions:
        raise RevisionUnknown(
            f"{where} has several revisions in its version table {VERSION_TABLE} "
            f"({', '.join(revisions)}), where a schema is at one: record the one its tables "
            f"are at with {STAMP_HINT}")
    if holds_history(conn):
        raise RevisionUnknown(
            f"{where} has the history's tables but no revision in {VERSION_TABLE}: record the "
            f"one they are at with {STAMP_HINT} (this sparkwatch's head is {SCHEMA_REVISION}), "
            "or drop them to start afresh")
    return None


STAMP_HINT = "`sparkwatch db stamp --revision REVISION`"
"""How a version table that does not say one revision is repaired (``migrate.stamp``)."""


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


def is_newer(revision: str) -> bool:
    """Whether ``revision`` is shaped as this sparkwatch's are and after its head: a newer
    sparkwatch's. Anything else not known here (``13``, a typo) is no one's revision."""
    return len(revision) == len(SCHEMA_REVISION) and revision.isdigit() \
        and revision > SCHEMA_REVISION


def is_older(revision: str) -> bool:
    """Whether ``revision`` is one this sparkwatch's migrations go past: they are numbered
    0001, 0002, ... up to :data:`SCHEMA_REVISION` (tests/test_migrations.py holds them to it)."""
    return len(revision) == len(SCHEMA_REVISION) and revision.isdigit() \
        and revision < SCHEMA_REVISION
