"""Alembic environment of the sparkwatch history.

Run through :mod:`sparkwatch.history.migrate`, which passes an open connection in
``config.attributes["connection"]``; a ``sqlalchemy.url`` main option works too (offline ``--sql``
or a hand-made Alembic config).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from alembic import context

from sparkwatch.history.schema import VERSION_TABLE, in_comparison, metadata

# Serialises concurrent upgrades: many drivers may attach to one PostgreSQL history at once.
PG_MIGRATION_LOCK = 0x73706B77  # "spkw"


def _options(dialect_name: str) -> dict[str, Any]:  # Any: configure() types each option
    return {
        "target_metadata": metadata,
        "version_table": VERSION_TABLE,
        "compare_type": True,
        "include_object": in_comparison,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        "render_as_batch": dialect_name == "sqlite",
        # SQLite's DDL is transactional, but Alembic assumes otherwise for it: a failed or
        # interrupted upgrade then left half a revision's tables behind, with the version row of
        # the revision before, and no later upgrade could get past them. PostgreSQL's default is
        # already True. (The whole run is one transaction: transaction_per_migration stays off.)
        "transactional_ddl": True,
    }


def run_offline() -> None:
    url = sa.engine.make_url(context.config.get_main_option("sqlalchemy.url") or "")
    context.configure(url=url, literal_binds=True, **_options(url.get_backend_name()))
    with context.begin_transaction():
        context.run_migrations()


@contextmanager
def _sqlite_transaction(connection: sa.Connection) -> Iterator[None]:
    """One SQLite transaction around the whole migration, rolled back whole on any exception
    (Ctrl-C included).

    pysqlite opens transactions itself, and only before INSERT/UPDATE/DELETE: its DDL
    autocommits. So, as SQLAlchemy's docs for pysqlite advise, the driver's own handling is off
    (``isolation_level = None``) and the BEGIN is ours. The connection may be the history
    writer's (pooled, used again afterwards): its settings are put back.
    """
    if connection.in_transaction():
        # Its statements so far ran under pysqlite's own handling: they could not be ours to
        # roll back. The history's callers (sparkwatch.history.migrate, run_online) never do it.
        raise RuntimeError("SQLite migrations need a connection with no transaction open")
    dbapi = connection.connection.driver_connection
    assert dbapi is not None
    saved_isolation = dbapi.isolation_level
    # Batch mode drops and re-creates tables: with foreign keys enforced, dropping a parent
    # table would cascade into its children's rows. The pragma is a no-op inside a transaction,
    # so it is set before BEGIN (SQLite's own procedure for schema changes). On the driver's
    # connection: these open no SQLAlchemy transaction.
    enforced = dbapi.execute("PRAGMA foreign_keys").fetchone() == (1,)
    dbapi.isolation_level = None
    if enforced:
        dbapi.execute("PRAGMA foreign_keys = OFF")
    try:
        with connection.begin():
            # IMMEDIATE: take the write lock now. Two processes migrating one file then queue
            # on SQLite's busy timeout (the later one finds the schema at head), as the advisory
            # lock makes them on PostgreSQL; a deferred BEGIN would have them both read the
            # version, then one fail to write.
            connection.exec_driver_sql("BEGIN IMMEDIATE")
            yield
    finally:
        # An interrupt inside the driver invalidates the connection: SQLite dropped the
        # transaction as it closed, and there is nothing left to put back.
        if not connection.invalidated:
            if enforced:
                dbapi.execute("PRAGMA foreign_keys = ON")
            dbapi.isolation_level = saved_isolation


def run_on(connection: sa.Connection) -> None:
    if connection.dialect.name == "sqlite":
        # The transaction is ours (external to Alembic, whose begin_transaction() below is then
        # a no-op): configured inside it, Alembic sees it already open.
        with _sqlite_transaction(connection):
            context.configure(connection=connection, **_options("sqlite"))
            with context.begin_transaction():
                context.run_migrations()
        return
    context.configure(connection=connection, **_options(connection.dialect.name))
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Released at commit; a waiting process then finds the schema already at head.
            lock = sa.text("SELECT pg_advisory_xact_lock(:key)")
            connection.execute(lock, {"key": PG_MIGRATION_LOCK})
            # After the advisory lock (another upgrade is waited for as long as it runs): a step
            # waiting on another session's lock fails instead of queueing every session after
            # it (sparkwatch.history.migrate.LOCK_WAIT_SECONDS). For this transaction only.
            wait = context.config.attributes.get("lock_wait_seconds")
            if wait:
                connection.execute(sa.text("SELECT set_config('lock_timeout', :ms, true)"),
                                   {"ms": f"{round(float(wait) * 1000)}ms"})
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_on(connection)
        return
    engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    try:
        # connect(), not begin(): run_on opens the transaction (SQLite's must start with our BEGIN).
        with engine.connect() as conn:
            run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
