"""Alembic environment of the sparkwatch history.

Run through :mod:`sparkwatch.history.migrate`, which passes an open connection in
``config.attributes["connection"]``; a ``sqlalchemy.url`` main option works too (offline ``--sql``
or a hand-made Alembic config).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from sparkwatch.history.schema import VERSION_TABLE, in_comparison, metadata

# Serialises concurrent upgrades: many drivers may attach to one PostgreSQL history at once.
PG_MIGRATION_LOCK = 0x73706B77  # "spkw"


def _options(dialect_name: str) -> dict[str, object]:
    return {
        "target_metadata": metadata,
        "version_table": VERSION_TABLE,
        "compare_type": True,
        "include_object": in_comparison,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        "render_as_batch": dialect_name == "sqlite",
    }


def run_offline() -> None:
    url = sa.engine.make_url(context.config.get_main_option("sqlalchemy.url") or "")
    context.configure(url=url, literal_binds=True, **_options(url.get_backend_name()))
    with context.begin_transaction():
        context.run_migrations()


def run_on(connection: sa.Connection) -> None:
    context.configure(connection=connection, **_options(connection.dialect.name))
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Released at commit; a waiting process then finds the schema already at head.
            lock = sa.text("SELECT pg_advisory_xact_lock(:key)")
            connection.execute(lock, {"key": PG_MIGRATION_LOCK})
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_on(connection)
        return
    engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url") or "")
    try:
        with engine.begin() as conn:
            run_on(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
