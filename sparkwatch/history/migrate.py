"""Programmatic Alembic for the history schema: no alembic.ini, scripts ship in the package.

Each function takes a URL or an existing engine (the writer migrates on its own engine, which also
keeps ``sqlite://`` in-memory databases working).

A new revision: ``command.revision(make_config(), "what changes", rev_id="0002")`` writes a stub
from ``script.py.mako``; write its operations by hand and bump ``schema.SCHEMA_REVISION``.
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError

from sparkwatch.history.engine import (
    LOCK_NOT_AVAILABLE,
    connect,
    create_engine,
    describe_url,
)
from sparkwatch.history.errors import MigrationError
from sparkwatch.history.revision import (
    STAMP_HINT,
    RevisionUnknown,
    current_of,
    holds_history,
    is_newer,
    recorded_revisions,
)
from sparkwatch.history.schema import VERSION_TABLE, metadata
from sparkwatch.summary import quoted

Target = str | sa.Engine


class BadRevision(MigrationError):
    """The target revision is empty, unknown, or not reachable from the database's."""


class MigrationBlocked(MigrationError):
    """A step waited past its bound for a lock another session holds (a long read, a backup):
    the whole migration was rolled back, nothing changed."""


LOCK_WAIT_SECONDS = 10.0
"""The most one migration step waits on PostgreSQL for a lock another session holds on a table
it changes. Past it the migration is rolled back and said so (:class:`MigrationBlocked`), to be
run again: waiting on, it held every write and read of that table queued behind it (an ALTER
TABLE waits for a ``pg_dump`` or a long dashboard query, and everything after waits for it).
The collector and the listener's writer retry it; ``db upgrade --lock-wait-seconds 0`` waits
for ever."""



class NoHistorySchema(MigrationError):
    """A downgrade of a database that has no sparkwatch history schema (no version table and
    none of its tables): nothing was written to it."""


def script_location() -> str:
    # The migration scripts are Alembic's to load, as files: the history layer does not import
    # them (they import the history's schema).
    return str(Path(str(resources.files("sparkwatch.migrations"))).resolve())


def make_config(connection: sa.Connection | None = None,
                lock_wait_seconds: float | None = None) -> Config:
    """``lock_wait_seconds``: PostgreSQL's lock_timeout for the migration's steps (env.py);
    None or 0: they wait for a lock as long as it is held."""
    config = Config()
    config.set_main_option("script_location", script_location())
    if connection is not None:
        config.attributes["connection"] = connection
    if lock_wait_seconds:
        config.attributes["lock_wait_seconds"] = lock_wait_seconds
    return config


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    """Every revision this sparkwatch ships."""
    return frozenset(script.revision for script in _scripts().walk_revisions())


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


def _run(target: Target, revision: str, alembic_command: Callable[[Config], None],
         must_exist: bool = False, needs_schema: bool = False,
         lock_wait_seconds: float | None = LOCK_WAIT_SECONDS) -> None:
    """Run ``alembic_command`` towards ``revision``; with ``needs_schema`` (a downgrade) only on
    a database sparkwatch migrated: Alembic creates its version table before any step, so a
    downgrade of another application's database (even to base) wrote a table into it."""
    if not revision.strip():
        # Alembic fails an empty revision with a bare AssertionError.
        raise BadRevision("no revision given (e.g. head, base, -1 or 0005)")
    if ":" in revision:
        # Alembic's start:end (for offline SQL): it said only "Range revision not allowed".
        raise BadRevision("a range is not a revision: give one (e.g. head, base, -1 or 0005)")
    with _IN_PROCESS, _connection(target, must_exist=must_exist) as conn:
        current, versioned = _check_not_newer(conn)
        if not needs_schema and not versioned:
            _refuse_foreign_tables(conn)
        if needs_schema and not versioned:
            with _revision_errors(revision):
                _scripts().get_revisions(revision)  # a mistyped revision is said as such first
            raise NoHistorySchema(
                f"{describe_url(conn.engine.url)} has no sparkwatch history schema "
                f"(no {VERSION_TABLE} table): nothing to downgrade")
        if revision == "head" and current == head():
            # Every history writer upgrades on its first write: at head, that must not take
            # SQLite's write lock (one migration run is one write transaction), which would wait
            # for every reader in the middle of a read.
            return
        with _revision_errors(revision), _lock_waits(conn, lock_wait_seconds):
            alembic_command(make_config(conn, lock_wait_seconds))
        conn.commit()


@contextmanager
def _lock_waits(conn: sa.Connection, seconds: float | None) -> Iterator[None]:
    """A step that waited past ``seconds`` for a lock, as :class:`MigrationBlocked`."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
        raise MigrationBlocked(
            f"the migration of {describe_url(conn.engine.url)} waited more than {seconds:g} s "
            "for a lock another session holds on a table it changes (a long read or a backup): "
            "it was rolled back, nothing changed; run it again once that session ends (`db "
            "upgrade --lock-wait-seconds 0` waits for it)") from None


@contextmanager
def _revision_errors(revision: str) -> Iterator[None]:
    """Alembic's refusals as :class:`BadRevision` (of the revision) or :class:`MigrationError`."""
    try:
        yield
    except CommandError as exc:
        error = BadRevision if isinstance(exc.__cause__, RevisionError) else MigrationError
        raise error(str(exc)) from None
    except AssertionError as exc:
        # Alembic asserts on some revision spellings ("0005@", "base+20"); an assert
        # elsewhere (a migration's) is a bug to show as it is.
        if not _raised_in_revision_lookup(exc):
            raise
        raise BadRevision(f"cannot resolve revision {quoted(revision)}") from None


def _check_not_newer(conn: sa.Connection) -> tuple[str | None, bool]:
    """The database's revision, and whether it has a version table (one sparkwatch migrated,
    maybe down to base since). Refuses a database migrated by a newer sparkwatch: Alembic would
    only say it cannot locate the revision, and advising `db upgrade` (which this is) would go
    round in circles; and one whose version table does not say one revision
    (:class:`~sparkwatch.history.revision.RevisionUnknown`)."""
    try:
        revision = current_of(conn)
        versioned = recorded_revisions(conn) is not None
    finally:
        conn.rollback()  # the reads' autobegun transaction: the migration opens its own
    if revision is not None and revision not in known_revisions():
        where = describe_url(conn.engine.url)
        if not is_newer(revision):
            raise RevisionUnknown(
                f"{where} has {revision!r} in its version table {VERSION_TABLE}, no revision of "
                f"this sparkwatch's ({min(known_revisions())} to {head()}) nor a later one: "
                f"record the one its tables are at with {STAMP_HINT}")
        raise MigrationError(
            f"{where} has history schema {revision}, newer than this sparkwatch (its newest is "
            f"{head()}): upgrade sparkwatch"
        )
    return revision, versioned


def _refuse_foreign_tables(conn: sa.Connection) -> None:
    """Before the first upgrade of a database sparkwatch never migrated: refuse one that has
    tables of the history's names (another application's ``batches``), which the migration
    would fail on midway ("table batches already exists"), or worse, share."""
    try:
        taken = sorted(set(sa.inspect(conn).get_table_names()) & set(metadata.tables))
        # Another first upgrade may have committed its tables (with their version) since the
        # version was read: then they are ours, and the migration below finds them at head.
        versioned = bool(taken) and recorded_revisions(conn) is not None
    finally:
        conn.rollback()
    if taken and not versioned:
        raise MigrationError(
            f"{describe_url(conn.engine.url)} has tables named as the history's ("
            f"{', '.join(taken)}) but no sparkwatch version table ({VERSION_TABLE}): they are "
            "not sparkwatch's; give the history a database (or schema) of its own")


def _raised_in_revision_lookup(exc: AssertionError) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and Path(frames[-1].filename).parts[-3:] == (
        "alembic", "script", "revision.py")


def upgrade(url: Target, revision: str = "head",
            lock_wait_seconds: float | None = LOCK_WAIT_SECONDS) -> None:
    """``lock_wait_seconds``: see :data:`LOCK_WAIT_SECONDS` (None or 0: no bound)."""
    _run(url, revision, lambda config: command.upgrade(config, revision),
         lock_wait_seconds=lock_wait_seconds)


def downgrade(url: Target, revision: str,
              lock_wait_seconds: float | None = LOCK_WAIT_SECONDS) -> None:
    """Only :func:`upgrade` creates a missing SQLite file: a downgrade of a mistyped path
    refuses it, as :func:`current` does, instead of leaving an empty file there. A database
    with no history schema raises :class:`NoHistorySchema`, untouched."""
    _run(url, revision, lambda config: command.downgrade(config, revision), must_exist=True,
         needs_schema=True, lock_wait_seconds=lock_wait_seconds)


def stamp(url: Target, revision: str) -> None:
    """Record ``revision`` (one this sparkwatch ships, or ``head``) as the one revision of a
    database whose tables are the history's, whatever its version table said: none (emptied,
    dropped) or several (:class:`~sparkwatch.history.revision.RevisionUnknown`). Nothing is
    migrated: the caller says which revision the tables are at. Refused for a database without
    the history's tables (an upgrade would then skip creating them) and for one a newer
    sparkwatch recorded (stamping it down would claim tables older than they are)."""
    target = head() if revision == "head" else revision
    if target not in known_revisions():
        raise BadRevision(f"{quoted(revision)} is not a revision this sparkwatch ships (they are "
                          f"{min(known_revisions())} to {head()}, or head)")
    with _IN_PROCESS, _connection(url, must_exist=True) as conn:
        where = describe_url(conn.engine.url)
        try:
            recorded = recorded_revisions(conn) or []
            tables = holds_history(conn)
        finally:
            conn.rollback()
        if not tables:
            raise NoHistorySchema(f"{where} has no sparkwatch history tables to record a "
                                  "revision of: `sparkwatch db upgrade` creates them")
        newer = [r for r in recorded if is_newer(r)]
        if newer:
            raise MigrationError(f"{where} has history schema {', '.join(newer)}, newer than "
                                 f"this sparkwatch (its newest is {head()}): upgrade sparkwatch")
        with _revision_errors(target):
            command.stamp(make_config(conn), target, purge=True)
        conn.commit()


def current(url: Target) -> str | None:
    """The database's revision, None when it has no history schema."""
    with _connection(url, must_exist=True) as conn:
        return current_of(conn)
