"""The raw database floor: the rows our history holds for the benchmark's events, loaded the
fastest plain way each database offers, into a fresh database at the current schema.

PostgreSQL: psycopg 3 ``COPY ... FROM STDIN``, one COPY per table and one transaction per
``per_tx`` events. SQLite: ``sqlite3`` ``executemany``, one transaction per ``per_tx`` events,
the database's default settings (the history sets none either). The rows come from
:func:`sparkwatch.history.rows.rows_for` and are turned into tuples (JSON already serialized,
SQLite timestamps already formatted) before timing, so only the database work is measured. Runs
are inserted once, when first seen: the floor does no upserts.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import psycopg
import sqlalchemy as sa

from bench.ingest.db import TABLES, conninfo
from sparkwatch.history import migrate
from sparkwatch.history.rows import Row, Rows, rows_for
from sparkwatch.history.schema import metadata
from sparkwatch.model.events import ParsedEvent

Backend = Literal["postgresql", "sqlite"]
# SQLAlchemy's own text format for SQLite DATETIME (what the history's files hold).
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"


@dataclass(frozen=True, slots=True)
class TableRows:
    table: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


Transaction = list[TableRows]


@dataclass(frozen=True, slots=True)
class FloorResult:
    events: int
    seconds: float
    counts: dict[str, int]
    disk_bytes: int
    """The history's tables and indexes on disk after the load (for the sizing table)."""

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def _json_columns() -> dict[str, set[str]]:
    return {t: {c.name for c in metadata.tables[t].columns if isinstance(c.type, sa.JSON)}
            for t in TABLES}


def _converter(backend: Backend, json_columns: set[str]) -> Any:
    def value(column: str, v: Any) -> Any:
        if v is None:
            return None
        if column in json_columns:
            return json.dumps(v)
        if backend == "sqlite" and isinstance(v, datetime):
            return v.strftime(SQLITE_TIME)
        return v

    return value


def _table_rows(table: str, rows: list[Row], backend: Backend, json_cols: set[str]
                ) -> TableRows:
    columns = tuple(rows[0]) if rows else ()
    value = _converter(backend, json_cols)
    return TableRows(table, columns, [tuple(value(c, r[c]) for c in columns) for r in rows])


def prepare(chunks: Iterable[Sequence[ParsedEvent]], backend: Backend) -> list[Transaction]:
    """The rows of each chunk of events as database tuples, one transaction per chunk."""
    json_cols, seen_runs = _json_columns(), set[str]()
    transactions = []
    for chunk in chunks:
        rows: Rows = rows_for(chunk)
        new_runs = [r for r in rows.runs if r["run_id"] not in seen_runs]
        seen_runs.update(r["run_id"] for r in new_runs)
        by_table = {"query_runs": new_runs, "batches": rows.batches,
                    "operator_batches": rows.operators, "source_batches": rows.sources,
                    "sink_batches": rows.sinks}
        transactions.append([_table_rows(t, by_table[t], backend, json_cols[t])
                             for t in TABLES if by_table[t]])
    return transactions


def load_postgresql(url: str, transactions: list[Transaction], events: int) -> FloorResult:
    migrate.upgrade(url)
    with psycopg.connect(conninfo(url)) as conn:
        started = time.perf_counter()
        for tx in transactions:
            with conn.transaction(), conn.cursor() as cur:
                for part in tx:
                    with cur.copy(f"COPY {part.table} ({', '.join(part.columns)}) FROM STDIN"
                                  ) as copy:  # type: ignore[arg-type]  # our own table names
                        for row in part.rows:
                            copy.write_row(row)
        seconds = time.perf_counter() - started
        counts = {t: _count(conn.execute(f"SELECT count(*) FROM {t}"))  # type: ignore[call-overload]
                  for t in TABLES}
        conn.execute("CHECKPOINT")
        disk = _count(conn.execute(
            # Every partition's size: a partitioned table itself holds nothing (0 bytes).
            "SELECT sum(pg_total_relation_size(p.relid)) FROM unnest(%s::text[]) AS t,"
            " LATERAL pg_partition_tree(quote_ident(t)::regclass) AS p",
            [list(TABLES)]))
    return FloorResult(events, seconds, counts, disk)


def _count(cursor: Any) -> int:
    return int(cursor.fetchone()[0])


def load_sqlite(path: Path, transactions: list[Transaction], events: int) -> FloorResult:
    migrate.upgrade(f"sqlite:///{path}")
    conn = sqlite3.connect(path)
    try:
        started = time.perf_counter()
        for tx in transactions:
            with conn:  # one transaction, committed on exit
                for part in tx:
                    marks = ", ".join("?" * len(part.columns))
                    conn.executemany(f"INSERT INTO {part.table} ({', '.join(part.columns)}) "
                                     f"VALUES ({marks})", part.rows)
        seconds = time.perf_counter() - started
        counts = {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
                  for t in TABLES}
    finally:
        conn.close()
    return FloorResult(events, seconds, counts, path.stat().st_size)
