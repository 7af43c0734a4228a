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

import weakref
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from sparkwatch.history.copyrows import COLUMNS, CopyRows, copy_rows
from sparkwatch.history.rows import json_safe
from sparkwatch.model.events import ParsedEvent

Processor = Callable[[Any], Any]
Compiled = tuple[str, Callable[[list[Any]], tuple[Any, ...]], list[tuple[int, Processor]]]
_COMPILED: weakref.WeakKeyDictionary[sa.Dialect, dict[str, Compiled]] = (
    weakref.WeakKeyDictionary())
"""Per engine's dialect (its JSON serializer is the engine's), forgotten with it."""


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
    sql, ordered, processors = _compiled(conn.dialect, model, table)
    params = []
    for row in values:
        parameters = list(ordered(row))
        for position, process in processors:  # a few columns: the times and the JSON maps
            parameters[position] = process(parameters[position])
        params.append(tuple(parameters))
    conn.exec_driver_sql(sql, params)


def _compiled(dialect: sa.Dialect, model: type[Any], table: str) -> Compiled:
    """The statement, a row's values in its parameters' order, and the bind processor of each
    parameter that has one (where SQLAlchemy would apply it)."""
    known = _COMPILED.setdefault(dialect, {})
    if table not in known:
        columns = list(COLUMNS[table])
        compiled = sqlite.insert(model).on_conflict_do_nothing().compile(
            dialect=dialect, column_keys=columns)
        processors: dict[str, Any] = dict(compiled._bind_processors)
        names = list(compiled.positiontup or [])
        known[table] = (compiled.string, itemgetter(*(columns.index(n) for n in names)),
                          [(i, processors[n]) for i, n in enumerate(names) if processors.get(n)])
    return known[table]
