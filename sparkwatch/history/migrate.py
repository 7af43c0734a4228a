"""Programmatic Alembic for the history schema: no alembic.ini, scripts ship in the package.

Each function takes a URL or an existing engine (the writer migrates on its own engine, which also
keeps ``sqlite://`` in-memory databases working).

A new revision: ``command.revision(make_config(), "what changes", rev_id="0002")`` writes a stub
from ``script.py.mako``; write its operations by hand and bump ``schema.SCHEMA_REVISION``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.util import CommandError

from sparkwatch.history.engine import connect, create_engine
from sparkwatch.history.errors import MigrationError
from sparkwatch.history.revision import current_of

Target = str | sa.Engine


def script_location() -> str:
    # The migration scripts are Alembic's to load, as files: the history layer does not import
    # them (they import the history's schema).
    return str(Path(str(resources.files("sparkwatch.migrations"))).resolve())


def make_config(connection: sa.Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", script_location())
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(make_config())


def head() -> str:
    """The newest revision this sparkwatch knows."""
    revision = _scripts().get_current_head()
    assert revision is not None, "migrations/versions has no revision"
    return revision


@contextmanager
def _connection(target: Target, must_exist: bool = False) -> Iterator[sa.Connection]:
    engine = create_engine(target, must_exist=must_exist) if isinstance(target, str) else target
    try:
        with connect(engine) as conn:
            yield conn
    finally:
        if isinstance(target, str):
            engine.dispose()


# Alembic's `context` is module-global: two migrations in one process must not overlap. Across
# processes, env.py takes a PostgreSQL advisory lock.
_IN_PROCESS = threading.Lock()


def _run(target: Target, alembic_command: Callable[[Config], None]) -> None:
    with _IN_PROCESS, _connection(target) as conn:
        try:
            alembic_command(make_config(conn))
        except CommandError as exc:
            raise MigrationError(str(exc)) from None
        conn.commit()


def upgrade(url: Target, revision: str = "head") -> None:
    _run(url, lambda config: command.upgrade(config, revision))


def downgrade(url: Target, revision: str) -> None:
    _run(url, lambda config: command.downgrade(config, revision))


def current(url: Target) -> str | None:
    """The database's revision, None when it has no history schema."""
    with _connection(url, must_exist=True) as conn:
        return current_of(conn)
