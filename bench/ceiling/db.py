"""PostgreSQL's share of one progress event: the history as it is written, and the least any
history keeping every field could write (one row per event holding Spark's JSON).

Both load into a fresh database with one COPY per ``per_tx`` events per transaction, the client
and the server on this machine; CPU of the client (this process) and of the server backends
serving the database (from ``/proc``) are counted separately.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

from bench.fleet import Fleet
from bench.ingest.db import conninfo, pg_database
from bench.procs import cpu_seconds
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import ParsedEvent

MINIMAL_TABLE = """CREATE TABLE raw_events (
    run_id uuid NOT NULL, batch_id bigint NOT NULL, query_id uuid NOT NULL,
    payload text COMPRESSION {compression} NOT NULL, PRIMARY KEY (run_id, batch_id))"""


@dataclass(frozen=True, slots=True)
class DbCost:
    what: str
    events: int
    seconds: float
    client_us: float
    """client CPU per event"""
    server_us: float
    """PostgreSQL backend CPU per event"""

    @property
    def rate(self) -> float:
        return self.events / self.seconds


@contextmanager
def _backends(admin_url: str, database: str) -> Iterator[Callable[[], float]]:
    """A function giving the CPU seconds used so far by the backends serving ``database``
    (connections seen at any call are remembered, so a closed one still counts up to then)."""
    seen: dict[int, float] = {}
    with psycopg.connect(conninfo(admin_url), autocommit=True) as admin:
        def used() -> float:
            rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s",
                                 (database,)).fetchall()
            for (pid,) in rows:
                with suppress(OSError):  # a backend that ended meanwhile keeps its last figure
                    seen[pid] = cpu_seconds(pid)
            return sum(seen.values())

        yield used


def _timed(admin_url: str, url: str, what: str, events: int,
           load: Callable[[Callable[[], float]], None]) -> DbCost:
    database = url.rsplit("/", 1)[1]
    with _backends(admin_url, database) as backend_cpu:
        load(backend_cpu)  # warms the connection and records the backends' CPU before
        server0, client0, wall0 = backend_cpu(), time.process_time(), time.perf_counter()
        load(backend_cpu)
        wall, client = time.perf_counter() - wall0, time.process_time() - client0
        server = backend_cpu() - server0
    return DbCost(what, events, wall, client / events * 1e6, server / events * 1e6)


def history_write(admin_url: str, chunks: list[list[ParsedEvent]]) -> DbCost:
    """The history writer (rows, COPY, run upserts) on already parsed events."""
    half = len(chunks) // 2
    with pg_database(admin_url, "ceiling") as url:
        writer = HistoryWriter(url)
        parts = iter((chunks[:half], chunks[half:]))

        def load(backend_cpu: Callable[[], float]) -> None:
            for chunk in next(parts):
                writer.write(chunk)
                backend_cpu()

        try:
            return _timed(admin_url, url, "the history as written: `HistoryWriter.write` "
                          "(rows, COPY of 7 rows, run upserts)",
                          sum(map(len, chunks[half:])), load)
        finally:
            writer.close()


def minimal_rows(fleet: Fleet, events: int) -> list[tuple[Any, ...]]:
    return [(e["payload"]["runId"], e["payload"]["batchId"], e["payload"]["id"],
             orjson.dumps(e["payload"]).decode()) for e in fleet.events(0, events)]


def minimal_write(admin_url: str, rows: list[tuple[Any, ...]], per_tx: int) -> DbCost:
    """One row per event, Spark's JSON as text (lz4-compressed where the server has lz4)."""
    half = len(rows) // 2
    with pg_database(admin_url, "ceiling") as url, \
            psycopg.connect(conninfo(url), autocommit=True) as conn:
        compression = "lz4"
        try:
            conn.execute(MINIMAL_TABLE.format(compression=compression))
        except psycopg.errors.FeatureNotSupported:
            compression = "pglz"
            conn.execute(MINIMAL_TABLE.format(compression=compression))
        parts = iter((rows[:half], rows[half:]))

        def load(backend_cpu: Callable[[], float]) -> None:
            part = next(parts)
            for start in range(0, len(part), per_tx):
                with conn.transaction(), conn.cursor().copy(
                        "COPY raw_events (run_id, batch_id, query_id, payload) FROM STDIN") as cp:
                    for row in part[start:start + per_tx]:
                        cp.write_row(row)
            backend_cpu()

        return _timed(admin_url, url, f"the least a history keeping every field writes: one "
                      f"row per event, Spark's JSON as text ({compression}), COPY",
                      len(rows) - half, load)
