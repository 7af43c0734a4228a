"""A migration on PostgreSQL waits a bounded time for a lock another session holds (a backup, a
long read of query_runs): past it, the whole migration is rolled back and said so, where it
queued every write and read of the table behind it for as long as that session lasted."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from sparkwatch.cli import db as db_cli
from sparkwatch.history import migrate
from sparkwatch.history.engine import describe_url
from sparkwatch.history.schema import SCHEMA_REVISION
from tests.support import run_cli as run
from tests.support import session_holding

pytestmark = pytest.mark.postgres

BEFORE = f"{int(SCHEMA_REVISION) - 1:04d}"
"""The revision before head: head's migration alters query_runs (a lock a reader blocks)."""


@contextmanager
def reading(url: str, table: str = "query_runs") -> Iterator[None]:
    """Another session in a transaction that read ``table``: it holds ACCESS SHARE until it
    ends, as ``pg_dump`` does for every table."""
    with session_holding(url, f"SELECT count(*) FROM {table}"):
        yield


def test_the_cli_s_default_is_the_migrations_own() -> None:
    assert db_cli.LOCK_WAIT_DEFAULT == migrate.LOCK_WAIT_SECONDS


def test_an_upgrade_blocked_by_a_reader_is_rolled_back_and_said_so_within_its_bound(
    pg_url: str, capsys: pytest.CaptureFixture[str],
) -> None:
    migrate.upgrade(pg_url, BEFORE)
    with reading(pg_url):
        began = time.monotonic()
        code, out, err = run(capsys, "db", "upgrade", "--lock-wait-seconds", "1",
                             "--url", pg_url)
        took = time.monotonic() - began
    assert (code, out) == (2, "")
    assert err == (f"sparkwatch db: error: the migration of {describe_url(pg_url)} waited more "
                   "than 1 s for a lock another session holds on a table it changes (a long "
                   "read or a backup): it was rolled back, nothing changed; run it again once "
                   "that session ends (`db upgrade --lock-wait-seconds 0` waits for it)\n")
    assert took < 10, took
    assert migrate.current(pg_url) == BEFORE
    # Once the reader is gone, the same command goes through.
    code, out, _ = run(capsys, "db", "upgrade", "--lock-wait-seconds", "1", "--url", pg_url)
    assert (code, migrate.current(pg_url)) == (0, SCHEMA_REVISION)


def test_with_no_bound_an_upgrade_waits_for_the_reader_and_then_completes(
    pg_url: str,
) -> None:
    migrate.upgrade(pg_url, BEFORE)
    done = threading.Event()
    failed: list[BaseException] = []

    def upgrade() -> None:
        try:
            migrate.upgrade(pg_url, lock_wait_seconds=0)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)
        finally:
            done.set()

    with reading(pg_url):
        worker = threading.Thread(target=upgrade)
        worker.start()
        # Still waiting past the default bound's worth of a short test: unbounded.
        assert not done.wait(2)
    assert done.wait(60)
    worker.join()
    assert not failed and migrate.current(pg_url) == SCHEMA_REVISION


def test_the_lock_bound_is_the_migration_s_own_and_leaves_the_session_s_setting(
    pg_url: str,
) -> None:
    """set_config(..., true): for the migration's transaction only; a connection the history
    writer migrates on (pooled, used again) keeps its own lock_timeout."""
    engine = sa.create_engine(pg_url)
    try:
        migrate.upgrade(engine, BEFORE)
        migrate.upgrade(engine, lock_wait_seconds=3)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SHOW lock_timeout")).scalar_one() == "0"
    finally:
        engine.dispose()
