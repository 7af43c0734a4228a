"""SQLite's fast write: a write's batch, operator, source and sink rows as positional tuples.

SQLAlchemy's executemany takes a dict per row and, for each, builds the parameters again through
every column's type: on SQLite about half of the history writer's CPU per event (bench: a
`cProfile` of the writer on the fleet's events, docs/benchmarks.md "A write path near the
floor"). Here the rows are PostgreSQL's COPY values (:mod:`.copyrows`: JSON columns already
their text, as the engine's encoder writes it), the statement is compiled once per table and
dialect, and the other columns go through the very bind processors SQLAlchemy would apply
(times), so SQLite stores the same bytes as the dict path (``tests/test_history_copyrows.py``
compares them).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite

from sparkwatch.history.copyrows import COLUMNS

Processor = Callable[[Any], Any]
Compiled = tuple[str, Callable[[list[Any]], tuple[Any, ...]], list[tuple[int, Processor]]]
_COMPILED: weakref.WeakKeyDictionary[sa.Dialect, dict[str, Compiled]] = (
    weakref.WeakKeyDictionary())
"""Per engine's dialect, forgotten with it."""


def insert_new(conn: sa.Connection, model: type[Any], table: str, values: list[list[Any]]
               ) -> int:
    """INSERT ... ON CONFLICT DO NOTHING of ``values`` (rows in ``COLUMNS[table]`` order, JSON
    columns as text); how many rows were new."""
    if not values:
        return 0
    sql, ordered, processors = _compiled(conn.dialect, model, table)
    params = []
    for row in values:
        parameters = list(ordered(row))
        for position, process in processors:  # a few columns: the times
            parameters[position] = process(parameters[position])
        params.append(tuple(parameters))
    return int(conn.exec_driver_sql(sql, params).rowcount)


def _compiled(dialect: sa.Dialect, model: type[Any], table: str) -> Compiled:
    """The statement, a row's values in its parameters' order, and the bind processor of each
    parameter that has one, but JSON columns (their values are already text)."""
    known = _COMPILED.setdefault(dialect, {})
    if table not in known:
        columns = list(COLUMNS[table])
        compiled = sqlite.insert(model).on_conflict_do_nothing().compile(
            dialect=dialect, column_keys=columns)
        processors: dict[str, Any] = dict(compiled._bind_processors)
        names = list(compiled.positiontup or [])
        is_json = {c.key: isinstance(c.type, sa.JSON) for c in model.__table__.columns}
        known[table] = (compiled.string, itemgetter(*(columns.index(n) for n in names)),
                        [(i, processors[n]) for i, n in enumerate(names)
                         if processors.get(n) and not is_json[n]])
    return known[table]
