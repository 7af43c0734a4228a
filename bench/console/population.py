"""A console benchmark history: ``queries`` queries, one run each, two state operators per
batch, spread back from now at one batch every ``interval`` seconds, inserted through the
product's own schema (migrations) on SQLite or PostgreSQL.

A marker table records the parameters: a database that already holds them is reused.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.schema import Batch, OperatorBatch, QueryRun

Log = Callable[[str], None]
OPERATORS = (("stateStoreSave", 0), ("dedupeWithinWatermark", 1))
CHUNK = 20_000
CUSTOM = {"rocksdbSstFileSize": 123456, "rocksdbCommitFlushLatency": 12,
          "rocksdbReadBlockCacheHitCount": 40, "rocksdbReadBlockCacheMissCount": 3}


@dataclass(frozen=True, slots=True)
class Population:
    operator_rows: int
    queries: int
    interval_s: float

    @property
    def batches_per_query(self) -> int:
        return self.operator_rows // (self.queries * len(OPERATORS))


def query_ids(p: Population) -> list[str]:
    return [str(uuid.UUID(int=i + 1)) for i in range(p.queries)]


def _marker(engine: sa.Engine) -> dict[str, Any] | None:
    with engine.connect() as conn:
        if not sa.inspect(conn).has_table("bench_console_population"):
            return None
        row = conn.execute(sa.text("select params from bench_console_population")).first()
        return json.loads(row[0]) if row else None


def build(url: str, p: Population, rebuild: bool, log: Log) -> tuple[bool, float]:
    """(reused, seconds taken)."""
    engine = sa.create_engine(url)
    try:
        if not rebuild and _marker(engine) == asdict(p):
            return True, 0.0
        started = time.monotonic()
        with engine.begin() as conn:
            for table in ("bench_console_population", *migrate_tables()):
                conn.execute(sa.text(f"drop table if exists {table} cascade")
                             if engine.dialect.name == "postgresql"
                             else sa.text(f"drop table if exists {table}"))
        migrate.upgrade(url)
        _load(engine, p, log)
        with engine.begin() as conn:
            conn.execute(sa.text("create table bench_console_population (params text)"))
            conn.execute(sa.text("insert into bench_console_population values (:p)"),
                         {"p": json.dumps(asdict(p))})
            conn.execute(sa.text("analyze"))
        return False, time.monotonic() - started
    finally:
        engine.dispose()


def migrate_tables() -> tuple[str, ...]:
    return ("sink_batches", "source_batches", "operator_batches", "batches", "operator_plans",
            "operator_rollups", "query_rollups", "query_stalls", "job_runs", "query_runs",
            "sparkwatch_alembic_version")


def _rows(p: Population, end: datetime) -> Iterator[tuple[list[dict[str, Any]],
                                                         list[dict[str, Any]]]]:
    """Chunks of (batches, operator rows), oldest first across every query."""
    n = p.batches_per_query
    ids = query_ids(p)
    batches: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    for b in range(n):
        ts = end - timedelta(seconds=(n - 1 - b) * p.interval_s)
        for qi, qid in enumerate(ids):
            at = ts - timedelta(milliseconds=qi)
            batches.append({
                "run_id": qid, "batch_id": b, "query_id": qid, "timestamp": at,
                "batch_duration_ms": 400 + (b * 7 + qi) % 300, "num_input_rows": 50,
                "input_rows_per_second": 10.0, "processed_rows_per_second": 12.5,
                "duration_ms": {"addBatch": 300, "queryPlanning": 20, "walCommit": 10},
                "watermark": at - timedelta(seconds=30), "observed_metrics": {},
                "add_batch_ms": 300, "query_planning_ms": 20, "wal_commit_ms": 10})
            for name, index in OPERATORS:
                ops.append({
                    "run_id": qid, "batch_id": b, "operator_index": index, "query_id": qid,
                    "timestamp": at, "operator_name": name,
                    "num_rows_total": 1000 + (b % 500) * 3, "num_rows_updated": 40,
                    "all_updates_time_ms": 5, "num_rows_removed": 35,
                    "all_removals_time_ms": 2, "commit_time_ms": 30,
                    "memory_used_bytes": 200_000 + b % 1000, "num_rows_dropped_by_watermark": 0,
                    "num_shuffle_partitions": 2, "num_state_store_instances": 2,
                    "custom_metrics": CUSTOM})
        if len(ops) >= CHUNK:
            yield batches, ops
            batches, ops = [], []
    if ops:
        yield batches, ops


def _load(engine: sa.Engine, p: Population, log: Log) -> None:
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(seconds=p.batches_per_query * p.interval_s)
    runs = [{"run_id": qid, "query_id": qid, "name": f"bench_query_{i:04d}",
             "app_name": "bench-console", "app_id": "app-bench", "spark_version": "4.0.0",
             "job_tags": None, "started_at": start, "ended_at": None, "status": "running",
             "last_event_at": end, "batches": p.batches_per_query, "tenant": "default"}
            for i, qid in enumerate(query_ids(p))]
    with engine.begin() as conn:
        conn.execute(QueryRun.__table__.insert(), runs)
    done = 0
    for batches, ops in _rows(p, end):
        with engine.begin() as conn:
            conn.execute(Batch.__table__.insert(), batches)
            conn.execute(OperatorBatch.__table__.insert(), ops)
        done += len(ops)
        if done % 200_000 < CHUNK:
            log(f"  {done:,} of {p.operator_rows:,} operator rows")
