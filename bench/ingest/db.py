"""Fresh history databases for the ingest benchmark, and counting what landed in them.

PostgreSQL databases are created for one run and dropped after it (named
``sparkwatch_bench_ingest_*``); SQLite files live in the run's temporary directory.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa

from sparkwatch.history.schema import VERSION_TABLE

DEFAULT_PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
PREFIX = "sparkwatch_bench_ingest_"
# What one progress event writes, in the order the writer writes it.
TABLES = ("query_runs", "batches", "operator_batches", "source_batches", "sink_batches")


def conninfo(url: str) -> str:
    """A SQLAlchemy URL as a libpq connection string (for psycopg itself)."""
    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(False)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@contextmanager
def pg_database(admin_url: str, label: str) -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped on exit."""
    name = f"{PREFIX}{label}_{uuid.uuid4().hex[:8]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield sa.engine.make_url(admin_url).set(database=name).render_as_string(False)
    finally:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(admin_url: str, sql: str) -> None:
    with psycopg.connect(conninfo(admin_url), autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[call-overload]  # a name we built, not user input


def check_pg(admin_url: str) -> str | None:
    """Why PostgreSQL cannot be used, or None."""
    try:
        with psycopg.connect(conninfo(admin_url), connect_timeout=5) as conn:
            conn.execute("select 1")
    except psycopg.Error as exc:
        return f"PostgreSQL not reachable at {admin_url}: {str(exc).strip()}"
    return None


class Counter:
    """Queries on the history the collector writes, over one connection kept open while
    polling (opened once the database exists: the collector creates a SQLite file itself)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: Any = None

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._conn is not None:
            self._conn.close()

    def _connection(self) -> Any:
        if self._conn is None:
            if self._url.startswith("sqlite"):
                path = sa.engine.make_url(self._url).database
                # Read-only: the poller must never hold the writer's lock beyond one count.
                self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            else:
                self._conn = psycopg.connect(conninfo(self._url), autocommit=True)
        return self._conn

    def scalar(self, sql: str) -> Any:
        """The first value of ``sql``; None when the file or table does not exist yet."""
        try:
            with closing(self._connection().cursor()) as cur:
                cur.execute(sql)
                row = cur.fetchone()
        except (sqlite3.OperationalError, psycopg.errors.UndefinedTable):
            self._forget_missing_file()
            return None
        return None if row is None else row[0]

    def _forget_missing_file(self) -> None:
        if self._url.startswith("sqlite") and self._conn is not None:
            self._conn.close()
            self._conn = None

    def revision(self) -> str | None:
        return self.scalar(f"SELECT version_num FROM {VERSION_TABLE}")  # type: ignore[no-any-return]

    def has_batch(self, run_id: str, batch_id: int) -> bool:
        # Values we generated (uuids, ints): inlined, as one query serves both drivers.
        return self.scalar(f"SELECT 1 FROM batches WHERE run_id = '{run_id}' "
                           f"AND batch_id = {int(batch_id)}") is not None

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {table}") or 0)

    def counts(self) -> dict[str, int]:
        return {table: self.count(table) for table in TABLES}
