"""The history rows as the collector writes them (each event read typed from the spool, the
per-batch rows built straight as COPY values on PostgreSQL) are the rows of the exact path (the
spool read as JSON, every event through the exact parser, rows as dicts): value for value, and
once stored byte for byte, on SQLite and PostgreSQL.

(The stored bytes are compared with the exact path on each database: COPY on PostgreSQL,
SQLAlchemy's executemany of dicts on SQLite, whose JSON the engine's encoder writes as COPY
does.)"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from bench.fleet import Fleet
from sparkwatch.collector.history_process import decode_records
from sparkwatch.collector.typedwire import typed_record
from sparkwatch.history import counts, lost, migrate
from sparkwatch.history import writer as history_writer
from sparkwatch.history.copy import TABLES as COPY_TABLES
from sparkwatch.history.copy import copy_statement
from sparkwatch.history.copyrows import copy_rows
from sparkwatch.history.engine import create_engine
from sparkwatch.history.rows import Rows, rows_for
from sparkwatch.history.schema import OperatorBatch, SinkBatch, SourceBatch
from sparkwatch.jsoncodec import dumps_text, loads
from sparkwatch.model.events import ParsedEvent, QueryProgress
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from sparkwatch.model.tenant import DEFAULT_TENANT
from tests.hostile import progress_event
from tests.support import create_database, drop_database
from tests.test_collector_support import fresh_ids, run_events
from tests.test_history_support import engine_for, writer

TABLES = ("query_runs", "batches", "operator_batches", "source_batches", "sink_batches")


def spooled() -> bytes:
    """One spool record: a fleet's progress events (RocksDB custom metrics) and a recorded run
    (started, progress, terminated), with a batch twice."""
    fleet = Fleet(queries=10, provider="rocksdb")
    template = fleet.template()
    events = [fleet.envelope(template, i) for i in range(40)]
    events += run_events(**fresh_ids())
    events.append(events[3])
    return orjson.dumps(events)


def typed_events(record: bytes) -> list[ParsedEvent]:
    events = decode_records([typed_record(record)])
    assert sum(isinstance(e.envelope.payload, dict) for e in events) < len(events)  # typed
    return events


def exact_events(record: bytes) -> list[ParsedEvent]:
    return decode_records([loads(record)])


def edge_events() -> list[ParsedEvent]:
    """Values the JSON columns must rewrite (non-finite numbers, NUL), encode by the standard
    library (an integer over 64 bits, a lone surrogate) or leave NULL. The
    contract keeps them out of a collector, but the listener's own history writes whatever
    Spark said: built here past the parser."""
    plain = parse_envelope(envelope_from_dict(progress_event("q-edge", "r-edge", 1)))
    progress = plain.event
    assert isinstance(progress, QueryProgress)
    op = replace(progress.state_operators[0], name="agg\x00x",
                 custom_metrics={"nan": math.nan, "inf": -math.inf, "ok": 3})
    # orjson refuses an integer over 64 bits and a lone surrogate: the standard library writes them
    source = replace(progress.sources[0], latest_offset=None,
                     start_offset={"p\x00": [1, math.inf]}, end_offset="e\x00",
                     metrics={"k\x00": "v\x00", "lone": "\ud800"})
    edge = replace(progress, batch_id=2, state_operators=(op, *progress.state_operators[1:]),
                   sources=(source,), sink=None,
                   observed_metrics={"o": {"x": math.nan, "big": 2**70}})
    return [plain, replace(plain, event=edge)]


def copy_values(rows: Rows) -> list[tuple[str, list[list[Any]]]]:
    """What the writer COPYed before: each table's dict rows taken apart in their keys' order,
    JSON columns encoded (the reference the COPY values are held to)."""
    statements = []
    for model, attribute in COPY_TABLES:
        table_rows = getattr(rows, attribute)
        if not table_rows:
            continue
        columns = list(table_rows[0])
        json_columns = {c for c in columns if isinstance(model.__table__.c[c].type, sa.JSON)}
        values = [[dumps_text(v) if c in json_columns and v is not None else v
                   for c, v in row.items()] for row in table_rows]
        statements.append((copy_statement(model.__tablename__, columns), values))
    return statements


def test_the_copy_values_are_those_of_the_dict_rows() -> None:
    for events in (typed_events(spooled()), exact_events(spooled()), edge_events()):
        assert copy_rows(events).statements() == copy_values(rows_for(events))
    _, edge = edge_events()
    assert isinstance(edge.event, QueryProgress)
    rows = copy_rows(edge_events()).values["operators"][-len(edge.event.state_operators)]
    assert rows[5] == "agg\ufffdx"
    assert rows[-1] == '{"nan":"NaN","inf":"-Infinity","ok":3}'


def test_the_copy_rows_name_each_run_once_per_batch_and_the_newest_batch() -> None:
    events = typed_events(spooled())
    rows = copy_rows(events)
    assert len(rows.batch_runs) == len(rows.values["batches"]) == len(
        {(e.event.run_id, e.event.batch_id) for e in events if hasattr(e.event, "batch_id")})
    assert rows.newest == max(row[3] for row in rows.values["batches"])


@contextmanager
def second_database(url: str, tmp_path: Path, pg_admin_url: str | None) -> Iterator[str]:
    if url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'exact.db'}"
        return
    assert pg_admin_url is not None
    name = create_database(pg_admin_url)
    try:
        yield sa.engine.make_url(pg_admin_url).set(database=name).render_as_string(
            hide_password=False)
    finally:
        drop_database(pg_admin_url, name)


def write_as_dicts(url: str, events: list[ParsedEvent]) -> None:
    """The writer's INSERT path with every row a dict through SQLAlchemy (SQLite's before
    :mod:`sparkwatch.history.sqlite_rows`), on an engine of the history's (its JSON encoder)."""
    migrate.upgrade(url)
    rows = rows_for(events)
    for run in rows.runs:
        run["tenant"] = DEFAULT_TENANT
    engine = create_engine(url)
    with engine.begin() as conn:
        history_writer._upsert_runs(conn, rows.runs)
        lost.end_replaced(conn, rows.runs)
        counts.add(conn, history_writer._insert_new_batches(conn, rows.batches))
        history_writer._insert_new(conn, OperatorBatch, rows.operators)
        history_writer._insert_new(conn, SourceBatch, rows.sources)
        history_writer._insert_new(conn, SinkBatch, rows.sinks)
    engine.dispose()


def stored(url: str) -> dict[str, list[Any]]:
    """Every row of the history's tables as the database holds it (PostgreSQL: each row's text,
    JSON as stored; SQLite: the stored values), in key order."""
    with engine_for(url).connect() as conn:
        if conn.dialect.name == "postgresql":
            return {t: sorted(conn.execute(sa.text(f"SELECT {t}::text FROM {t}")).scalars())
                    for t in TABLES}
        return {t: sorted(map(tuple, conn.execute(sa.text(f"SELECT * FROM {t}"))), key=repr)
                for t in TABLES}


def test_the_collector_stores_the_exact_paths_rows_byte_for_byte(
    history_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    admin = (request.getfixturevalue("pg_admin_url")
             if not history_url.startswith("sqlite") else None)
    record = spooled()
    with writer(history_url) as w:
        w.write(typed_events(record))
        assert w._copy is (not history_url.startswith("sqlite"))  # PostgreSQL: COPY ran
    with second_database(history_url, tmp_path, admin) as exact_url:
        if history_url.startswith("sqlite"):
            write_as_dicts(exact_url, exact_events(record))  # SQLAlchemy's executemany, as before
        else:
            with writer(exact_url) as w:
                w.write(exact_events(record))
        expected = stored(exact_url)
        engine_for(exact_url).dispose()
    got = stored(history_url)
    batches = 40 + sum(e["kind"] == "progress" for e in run_events())
    assert {t: len(rows) for t, rows in got.items() if t != "operator_batches"} == {
        "query_runs": 11, "batches": batches, "source_batches": batches, "sink_batches": batches}
    assert len(got["operator_batches"]) >= batches
    assert got == expected


def test_edge_values_are_stored_as_the_dict_path_stores_them(
    history_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """NaN, NUL, an integer over 64 bits and a lone surrogate, written by the writer's fast path
    (COPY on PostgreSQL, positional tuples on SQLite) and by SQLAlchemy's INSERT of dict rows
    (SQLite's exact path, PostgreSQL's path for replays): the same bytes stored."""
    admin = (request.getfixturevalue("pg_admin_url")
             if not history_url.startswith("sqlite") else None)
    with writer(history_url) as w:
        w.write(edge_events())
    with second_database(history_url, tmp_path, admin) as dict_url:
        write_as_dicts(dict_url, edge_events())
        expected = stored(dict_url)
        engine_for(dict_url).dispose()
    got = stored(history_url)
    assert len(got["batches"]) == 2 and got == expected
    assert any("1180591620717411303424" in str(row) for row in got["batches"])
