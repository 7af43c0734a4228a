"""Builds (or reuses) the benchmark's PostgreSQL history: schema by the product's migrations, rows
generated server-side (:mod:`bench.history.sql`) in time-ordered chunks, one transaction each.

A marker table (``bench_population``) records the parameters, the population's end time and how
far loading got: a database that already holds the requested population is reused as it is, an
interrupted load resumes at its next chunk, and other parameters rebuild the database. While
loading, the bulk tables' keys, foreign keys and indexes are dropped (their exact definitions are
kept in the marker) and recreated afterwards, so the final schema is the migrations' own.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from bench.history import sql as gen
from bench.history import templates as history_templates
from bench.history.spec import Population
from sparkwatch.history import migrate, partitions
from sparkwatch.history.engine import parse_url

Log = Callable[[str], None]
BULK_TABLES = ("batches", "operator_batches", "source_batches", "sink_batches")
DERIVED_TABLES = ("query_rollups", "operator_rollups", "query_stalls")
# Bytes on disk per batch (with its children, indexes and rollups), measured at 10M rows (1.1
# operators a batch), plus what PostgreSQL needs beside it while building indexes.
BYTES_PER_BATCH = 3_100
BYTES_PER_OPERATOR = 900
HEADROOM_BYTES = 10 << 30
MINUTE_ROLLUPS = timedelta(days=7)
EXCEPTION = (
    "org.apache.spark.sql.streaming.StreamingQueryException: [STREAM_FAILED] Query [id = {id}] "
    "terminated with exception: Job aborted due to stage failure: Task 3 in stage 5124.0 failed "
    "4 times, most recent failure: Lost task 3.3 in stage 5124.0 (TID 81002) (10.0.4.17 executor "
    "7): org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the "
    "position for partition events-3 could be determined\n"
    "\tat org.apache.spark.sql.kafka010.KafkaDataConsumer.get(KafkaDataConsumer.scala:118)\n"
    "\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.runBatch("
    "MicroBatchExecution.scala:735)\n"
)


@dataclass(frozen=True, slots=True)
class Loaded:
    """A population ready to measure."""

    population: Population
    end: datetime
    counts: dict[str, int]
    size_bytes: int
    built_seconds: float
    reused: bool


def admin_url(url: str) -> sa.URL:
    return parse_url(url).set(database="postgres")


def _admin(url: str) -> sa.Engine:
    return sa.create_engine(admin_url(url), isolation_level="AUTOCOMMIT")


def database_exists(url: str) -> bool:
    name = parse_url(url).database
    with _admin(url).connect() as conn:
        found = conn.execute(sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name})
        return found.first() is not None


def create_database(url: str) -> None:
    with _admin(url).connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{parse_url(url).database}"'))


def drop_database(url: str) -> None:
    with _admin(url).connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{parse_url(url).database}" WITH (FORCE)'))


def check_disk(url: str, population: Population) -> None:
    """Refuse to start a load the disk cannot hold (PostgreSQL's data directory's file system,
    or / when that directory is not readable here)."""
    with _admin(url).connect() as conn:
        data_dir = str(conn.execute(sa.text("SHOW data_directory")).scalar_one())
    try:
        free = shutil.disk_usage(data_dir).free
    except OSError:
        free = shutil.disk_usage("/").free
    operators = population.expected()["operator_batches"]
    need = population.rows * BYTES_PER_BATCH + HEADROOM_BYTES
    if population.operators is not None:
        need += max(0, operators - population.rows) * BYTES_PER_OPERATOR
    if free < need:
        raise SystemExit(f"[bench] {population.rows:,} rows need about {need / 2**30:.0f} GiB "
                         f"free, {free / 2**30:.0f} GiB are: use a smaller --rows")


# --- marker -------------------------------------------------------------------------------------


def _marker(conn: sa.Connection) -> dict[str, Any] | None:
    exists = conn.execute(sa.text("SELECT to_regclass('bench_population')")).scalar_one()
    if exists is None:
        return None
    row = conn.execute(sa.text("SELECT * FROM bench_population")).mappings().first()
    return dict(row) if row is not None else None


def _set_marker(conn: sa.Connection, **values: Any) -> None:
    sets = ", ".join(f"{k} = :{k}" for k in values)
    conn.execute(sa.text(f"UPDATE bench_population SET {sets}"), values)


def read_marker(url: str) -> dict[str, Any] | None:
    if not database_exists(url):
        return None
    engine = sa.create_engine(parse_url(url))
    try:
        with engine.connect() as conn:
            return _marker(conn)
    finally:
        engine.dispose()


# --- loading ------------------------------------------------------------------------------------


def _session(conn: sa.Connection) -> None:
    # Per session only: the server's settings are shared with other users of this PostgreSQL.
    for setting in ("synchronous_commit = off", "work_mem = '256MB'",
                    "maintenance_work_mem = '1GB'", "max_parallel_maintenance_workers = 2"):
        conn.execute(sa.text(f"SET {setting}"))


def _start(conn: sa.Connection, population: Population, log: Log) -> None:
    """Helper tables, the marker, and the bulk tables stripped of keys and indexes."""
    end = datetime.now(UTC).replace(second=0, microsecond=0)
    conn.execute(sa.text(gen.HELPERS))
    ddl = _strip_bulk_tables(conn)
    conn.execute(sa.text(
        "CREATE TABLE bench_population (params jsonb NOT NULL, end_at timestamptz NOT NULL, "
        "chunks_done int NOT NULL, stage text NOT NULL, ddl jsonb NOT NULL, "
        "built_seconds float8 NOT NULL)"))
    conn.execute(sa.text("INSERT INTO bench_population VALUES (:p, :e, 0, 'chunks', :d, 0)"),
                 {"p": json.dumps(population.params()), "e": end, "d": json.dumps(ddl)})
    _write_helpers(conn, population)
    # Partitioned (PostgreSQL at 0010): every day of the population gets its partition, as the
    # retention job would have made them ahead, so no row waits in a DEFAULT partition.
    partitions.ensure(conn, partitions.days(end - population.span() - timedelta(days=1), end))
    conn.execute(sa.text(gen.FIRST_TS), {"end_at": end, "b": population.batches_per_query})
    conn.execute(sa.text(gen.RUNS))
    log(f"[bench] population: {population.queries} queries, {population.rows:,} batches "
        f"ending {end:%Y-%m-%d %H:%M} UTC")


def _strip_bulk_tables(conn: sa.Connection) -> dict[str, list[str]]:
    tables = "{" + ",".join(BULK_TABLES) + "}"
    constraints = conn.execute(sa.text(gen.CONSTRAINTS), {"tables": tables}).all()
    indexes = conn.execute(sa.text(gen.INDEXES), {"tables": tables}).all()
    for table, name, _, _ in sorted(constraints, key=lambda c: c[2] != "f"):  # foreign first
        conn.execute(sa.text(f'ALTER TABLE {table} DROP CONSTRAINT "{name}"'))
    for name, _ in indexes:
        conn.execute(sa.text(f"DROP INDEX {name}"))
    return {
        "primary": [f'ALTER TABLE {t} ADD CONSTRAINT "{n}" {d}'
                    for t, n, kind, d in constraints if kind == "p"],
        # A partitioned parent's index reads "ON ONLY" (builds nothing on the partitions).
        "indexes": [definition.replace(" ON ONLY ", " ON ") for _, definition in indexes],
        "foreign": [f'ALTER TABLE {t} ADD CONSTRAINT "{n}" {d}'
                    for t, n, kind, d in constraints if kind == "f"],
    }


def _write_helpers(conn: sa.Connection, population: Population) -> None:
    specs = population.query_specs()
    conn.execute(sa.text(
        "INSERT INTO bench_queries (q, query_id, app_name, app_id, name, interval_s, runs, "
        "provider, end_offset_s) VALUES (:q, :query_id, :app_name, :app_id, :name, :interval_s, "
        ":runs, :provider, :end_offset_s)"),
        [{k: v for k, v in asdict(s).items() if k != "kinds"} for s in specs])
    conn.execute(sa.text("INSERT INTO bench_query_ops VALUES (:q, :i, :kind, :provider)"),
                 [{"q": s.q, "i": i, "kind": kind, "provider": s.provider}
                  for s in specs for i, kind in enumerate(s.kinds)])
    conn.execute(sa.text(
        "INSERT INTO bench_runs VALUES (:q, :ri, :run_id, :first_i, :last_i, :status, :failed)"),
        [asdict(r) for r in population.run_specs()])
    _write_templates(conn)


def _write_templates(conn: sa.Connection) -> None:
    templates = history_templates.load()
    conn.execute(sa.text(
        "INSERT INTO bench_op_templates VALUES (:provider, :kind, :operator_name, "
        ":num_shuffle_partitions, :num_state_store_instances, :custom, :a, :b, :plan)"),
        [{**asdict(t), "custom": json.dumps(t.custom_metrics), "a": t.varied[0],
          "b": t.varied[1], "plan": json.dumps(t.plan)} for t in templates.operators])
    conn.execute(sa.text("INSERT INTO bench_io_templates VALUES (:s, :k, :e)"),
                 {"s": templates.source["description"], "k": templates.sink["description"],
                  "e": EXCEPTION.format(id="<query id>")})


def _load_chunks(engine: sa.Engine, population: Population, log: Log) -> None:
    with engine.connect() as conn:
        marker = _marker(conn)
    assert marker is not None
    chunks = population.chunks(marker["end_at"])
    started = time.monotonic()
    for n in range(marker["chunks_done"], len(chunks)):
        t0, t1 = chunks[n]
        with engine.begin() as conn:
            _session(conn)
            params = {"t0": t0, "t1": t1, "b": population.batches_per_query}
            for statement in gen.CHUNK_STATEMENTS:
                conn.execute(sa.text(statement), params)
            _set_marker(conn, chunks_done=n + 1)
        if (n + 1) % 10 == 0 or n + 1 == len(chunks):
            log(f"[bench] loaded chunk {n + 1}/{len(chunks)} "
                f"({time.monotonic() - started:.0f} s)")


def _finish(engine: sa.Engine, log: Log) -> None:
    """Keys, indexes and foreign keys back; then what the collector derives; then statistics."""
    with engine.connect() as conn:
        marker = _marker(conn)
    assert marker is not None
    if marker["stage"] == "chunks":
        _timed(engine, log, "keys and indexes", [
            *marker["ddl"]["primary"], *marker["ddl"]["indexes"], *marker["ddl"]["foreign"]])
        _advance(engine, "derived")
    if marker["stage"] in ("chunks", "derived"):
        _derive(engine, marker["end_at"], log)
        _advance(engine, "vacuum")
    vacuum = engine.execution_options(isolation_level="AUTOCOMMIT")
    with vacuum.connect() as conn:
        _session(conn)
        started = time.monotonic()
        conn.execute(sa.text("VACUUM (ANALYZE)"))
        log(f"[bench] VACUUM ANALYZE ({time.monotonic() - started:.0f} s)")
    _advance(engine, "done")


def _derive(engine: sa.Engine, end: datetime, log: Log) -> None:
    with engine.begin() as conn:
        for table in DERIVED_TABLES + ("operator_plans",):
            conn.execute(sa.text(f"DELETE FROM {table}"))
    statements: list[str | sa.Executable] = [gen.RUN_BATCH_COUNTS, gen.PLANS, gen.STALLS]
    for resolution, seconds, since in (("minute", 60, end - MINUTE_ROLLUPS),
                                       ("hour", 3600, datetime(2000, 1, 1, tzinfo=UTC))):
        statements += gen.rollup_inserts(resolution, seconds, since)
    statements += gen.day_rollup_inserts(datetime(2000, 1, 1, tzinfo=UTC))
    _timed(engine, log, "run batch counts, plans, stall marks, rollups", statements)


def _timed(engine: sa.Engine, log: Log, what: str, statements: list[str | sa.Executable]) -> None:
    started = time.monotonic()
    with engine.begin() as conn:
        _session(conn)
        for statement in statements:
            conn.execute(sa.text(statement) if isinstance(statement, str) else statement)
    log(f"[bench] {what} ({time.monotonic() - started:.0f} s)")


def _advance(engine: sa.Engine, stage: str) -> None:
    with engine.begin() as conn:
        _set_marker(conn, stage=stage)


# --- entry point --------------------------------------------------------------------------------

COUNTED = ("query_runs", *BULK_TABLES, "operator_plans", *DERIVED_TABLES)


def ensure(url: str, population: Population, rebuild: bool, log: Log) -> Loaded:
    """The population at ``url``: reused when complete, resumed when interrupted, else built."""
    _check_dedicated(url)
    marker = None if rebuild else read_marker(url)
    if marker is not None and marker["params"] != population.params():
        log(f"[bench] {describe(url)} holds another population ({marker['params']}): rebuilding")
        marker = None
    if marker is not None and marker["stage"] == "done":
        return loaded(url, population, reused=True)
    started = time.monotonic()
    if marker is None:
        check_disk(url, population)
        drop_database(url)
        create_database(url)
        migrate.upgrade(url)
    engine = sa.create_engine(parse_url(url))
    try:
        if marker is None:
            with engine.begin() as conn:
                _start(conn, population, log)
        else:
            log(f"[bench] resuming the load of {describe(url)} ({marker['stage']})")
        _load_chunks(engine, population, log)
        _finish(engine, log)
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE bench_population SET built_seconds = built_seconds + :s"),
                         {"s": time.monotonic() - started})
    finally:
        engine.dispose()
    return loaded(url, population, reused=False)


def loaded(url: str, population: Population, reused: bool) -> Loaded:
    engine = sa.create_engine(parse_url(url))
    try:
        with engine.connect() as conn:
            marker = _marker(conn)
            assert marker is not None
            counts = {t: int(conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one())
                      for t in COUNTED}
            size = int(conn.execute(
                sa.text("SELECT pg_database_size(current_database())")).scalar_one())
    finally:
        engine.dispose()
    return Loaded(population, marker["end_at"], counts, size, float(marker["built_seconds"]),
                  reused)


def missing_rows(result: Loaded) -> dict[str, tuple[int, int]]:
    """Tables whose count differs from the population's: table -> (expected, found)."""
    return {t: (n, result.counts[t]) for t, n in result.population.expected().items()
            if result.counts[t] != n}


def describe(url: str) -> str:
    return parse_url(url).render_as_string(hide_password=True)


def _check_dedicated(url: str) -> None:
    # The bench drops and recreates its database: never one that is not obviously its own.
    name = parse_url(url).database or ""
    if not (name.startswith("sparkwatch_bench") or name.endswith("_bench")):
        raise SystemExit(f"[bench] the database name must start with 'sparkwatch_bench' or end "
                         f"with '_bench' (it is dropped and rebuilt): {describe(url)}")
