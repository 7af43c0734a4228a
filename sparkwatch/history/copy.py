"""The bulk path into PostgreSQL: COPY the per-batch tables instead of INSERT ... ON CONFLICT.

COPY streams rows in PostgreSQL's own format with no per-row statement, which is what lets one
collector keep up with a fleet (see docs/benchmarks.md, "Collector ingest"). It has no ON
CONFLICT, so it is the fast path for new batches only: if any row already exists (a replayed spool,
a retry after a commit whose answer was lost), the transaction fails with a unique violation and
:class:`~sparkwatch.history.writer.HistoryWriter` writes the same events again with its idempotent
INSERTs. Only for psycopg 3 (our PostgreSQL driver).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from sparkwatch.history.schema import Batch, OperatorBatch, SinkBatch, SourceBatch

# Parents before children: the children's foreign keys are checked row by row.
TABLES: tuple[tuple[type[Any], str], ...] = (
    (Batch, "batches"),
    (OperatorBatch, "operators"),
    (SourceBatch, "sources"),
    (SinkBatch, "sinks"),
)


def supports_copy(dialect: sa.Dialect) -> bool:
    return dialect.name == "postgresql" and dialect.driver == "psycopg"


def is_duplicate(exc: BaseException) -> bool:
    """A unique violation, from COPY (psycopg's own error) or wrapped by SQLAlchemy."""
    if isinstance(exc, sa.exc.IntegrityError):
        exc = exc.orig or exc
    try:
        from psycopg.errors import UniqueViolation
    except ImportError:  # pragma: no cover - no psycopg, no COPY
        return False
    return isinstance(exc, UniqueViolation)


def copy_statement(table: str, columns: Sequence[str]) -> str:
    return "COPY {} ({}) FROM STDIN".format(table, ", ".join(f'"{c}"' for c in columns))


def copy_statements(conn: sa.Connection, statements: list[tuple[str, list[list[Any]]]]) -> None:
    """Run each COPY statement with its rows' values inside ``conn``'s transaction (the values
    of :func:`~sparkwatch.history.copyrows.copy_rows`).

    Raises ``psycopg.errors.UniqueViolation`` when a row exists already (nothing is written: the
    transaction is aborted).
    """
    driver = conn.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor:
        for statement, values in statements:
            with cursor.copy(statement) as copy:
                for row in values:
                    copy.write_row(row)
