"""SQLite's INSERT of a write's operator, source and sink rows as positional tuples.

SQLAlchemy's executemany takes a dict per row and, for each, builds the parameters again through
every column's type: on SQLite about half of the history writer's CPU per event (bench: a
`cProfile` of the writer on the fleet's events, docs/benchmarks.md "A write path near the
floor"). Here the statement is compiled once per table and dialect, and each row's values (in
the columns of :mod:`.copyrows`, JSON columns still Python values) go through the very bind
processors SQLAlchemy would apply, so SQLite stores the same bytes
(``tests/test_history_copyrows.py`` compares them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from sparkwatch.history.copyrows import COLUMNS, CopyRows, copy_rows
from sparkwatch.history.rows import json_safe
from sparkwatch.model.events import ParsedEvent

Processor = Callable[[Any], Any] | None
_COMPILED: dict[tuple[str, sa.Dialect], tuple[str, list[tuple[int, Processor]]]] = {}


def sqlite_rows(events: Sequence[ParsedEvent]) -> CopyRows:
    """The per-batch rows of ``events`` with the values of :mod:`.rows`' dicts (JSON columns
    as JSON-safe Python values, for SQLAlchemy's encoder)."""
    return copy_rows(events, json=json_safe, plain=_same)


def _same(value: Any) -> Any:
    return value


def batch_dicts(rows: CopyRows) -> list[dict[str, Any]]:
    """The batch rows as :func:`.rows.batch_row` dicts (their INSERT needs RETURNING, which
    SQLAlchemy provides)."""
    columns = COLUMNS["batches"]
    return [dict(zip(columns, values, strict=True)) for values in rows.values["batches"]]


def insert_new(conn: sa.Connection, model: type[Any], table: str, values: list[list[Any]]
               ) -> None:
    """INSERT ... ON CONFLICT DO NOTHING of ``values`` (rows in ``COLUMNS[table]`` order)."""
    if not values:
        return
    sql, order = _compiled(conn.dialect, model, table)
    conn.exec_driver_sql(sql, [tuple(row[i] if p is None else p(row[i]) for i, p in order)
                               for row in values])


def _compiled(dialect: sa.Dialect, model: type[Any], table: str
              ) -> tuple[str, list[tuple[int, Processor]]]:
    key = (table, dialect)
    if key not in _COMPILED:
        columns = list(COLUMNS[table])
        compiled = sqlite.insert(model).on_conflict_do_nothing().compile(
            dialect=dialect, column_keys=columns)
        processors: dict[str, Any] = dict(compiled._bind_processors)  # what SQLAlchemy applies
        names = compiled.positiontup or []
        _COMPILED[key] = (compiled.string,
                          [(columns.index(n), processors.get(n)) for n in names])
    return _COMPILED[key]
