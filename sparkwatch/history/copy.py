"""The bulk path into PostgreSQL: COPY the per-batch tables instead of INSERT ... ON CONFLICT.

COPY streams rows in PostgreSQL's own format with no per-row statement, which is what lets one
collector keep up with a fleet (see docs/benchmarks.md, "Collector ingest"). It has no ON
CONFLICT, so it is the fast path for new batches only: if any row already exists (a replayed spool,
a retry after a commit whose answer was lost), the transaction fails with a unique violation and
:class:`~sparkwatch.history.writer.HistoryWriter` writes the same events again with its idempotent
INSERTs. Only for psycopg 3 (our PostgreSQL driver).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from sparkwatch.history.rows import Row, Rows
from sparkwatch.history.schema import Batch, OperatorBatch, SinkBatch, SourceBatch
from sparkwatch.jsoncodec import dumps_text as json_text

# Parents before children: the children's foreign keys are checked row by row.
TABLES: tuple[tuple[type[Any], str], ...] = (
    (Batch, "batches"),
    (OperatorBatch, "operators"),
    (SourceBatch, "sources"),
    (SinkBatch, "sinks"),
)


def supports_copy(conn: sa.Connection) -> bool:
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg"


def is_duplicate(exc: BaseException) -> bool:
    """A unique violation, from COPY (psycopg's own error) or wrapped by SQLAlchemy."""
    if isinstance(exc, sa.exc.IntegrityError):
        exc = exc.orig or exc
    try:
        from psycopg.errors import UniqueViolation
    except ImportError:  # pragma: no cover - no psycopg, no COPY
        return False
    return isinstance(exc, UniqueViolation)


def copy_batches(conn: sa.Connection, rows: Rows) -> None:
    """COPY the batch, operator, source and sink rows inside ``conn``'s transaction.

    Raises ``psycopg.errors.UniqueViolation`` when a row exists already (nothing is written: the
    transaction is aborted).
    """
    copy_statements(conn, copy_values(rows))


def copy_statements(conn: sa.Connection, statements: list[tuple[str, list[list[Any]]]]) -> None:
    """Run each COPY statement with its rows' values inside ``conn``'s transaction (raises as
    :func:`copy_batches`)."""
    driver = conn.connection.driver_connection
    assert driver is not None
    with driver.cursor() as cursor:
        for statement, values in statements:
            with cursor.copy(statement) as copy:
                for row in values:
                    copy.write_row(row)


def copy_values(rows: Rows) -> list[tuple[str, list[list[Any]]]]:
    """Each table's COPY statement and the values of its rows, parents first (tables with no
    rows left out)."""
    statements = []
    for model, attribute in TABLES:
        table_rows: list[Row] = getattr(rows, attribute)
        if not table_rows:
            continue
        columns = list(table_rows[0])
        statement = "COPY {} ({}) FROM STDIN".format(
            model.__tablename__, ", ".join(f'"{c}"' for c in columns)
        )
        convert = _converter(model, columns)
        statements.append((statement, [convert(row) for row in table_rows]))
    return statements


def _converter(model: type[Any], columns: Sequence[str]) -> Callable[[Row], list[Any]]:
    """Row dict -> COPY values in ``columns`` order, JSON columns as JSON text."""
    table = model.__table__
    json_positions = [
        i for i, name in enumerate(columns) if isinstance(table.c[name].type, sa.JSON)
    ]

    def convert(row: Row) -> list[Any]:
        values = list(row.values())
        for i in json_positions:
            value = values[i]
            if value is not None:
                values[i] = json_text(value)
        return values

    return convert
