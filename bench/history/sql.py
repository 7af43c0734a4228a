"""SQL that generates the benchmark's history server-side (PostgreSQL), from the ``bench_*``
helper tables :mod:`bench.history.population` writes.

Batch ``i`` of query ``q`` happens at ``first_ts + i * interval_s``; every other value is a
function of ``h``, a hash of (q, i), so rows differ from batch to batch as in a real fleet but a
rebuild gives the same data. Rows are inserted in time order, all queries interleaved, the order
in which a collector writes them: a query's rows are spread over the table as in production.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from sparkwatch.history import rollups
from sparkwatch.history.schema import OperatorRollup, QueryRollup

HELPERS = """
CREATE TABLE bench_queries (
  q int PRIMARY KEY, query_id text NOT NULL, app_name text NOT NULL, app_id text NOT NULL,
  name text, interval_s int NOT NULL, runs int NOT NULL, provider text NOT NULL,
  end_offset_s int NOT NULL, first_ts timestamptz);
CREATE TABLE bench_query_ops (q int, operator_index int, kind int, provider text,
  PRIMARY KEY (q, operator_index));
CREATE TABLE bench_runs (q int, ri int, run_id text NOT NULL, first_i int NOT NULL,
  last_i int NOT NULL, status text NOT NULL, failed boolean NOT NULL, PRIMARY KEY (q, ri));
CREATE TABLE bench_op_templates (provider text, kind int, operator_name text NOT NULL,
  num_shuffle_partitions int NOT NULL, num_state_store_instances int NOT NULL,
  custom_metrics jsonb NOT NULL, varied_a text NOT NULL, varied_b text NOT NULL,
  plan jsonb NOT NULL, PRIMARY KEY (provider, kind));
CREATE TABLE bench_io_templates (source_description text NOT NULL,
  sink_description text NOT NULL, exception text NOT NULL);
"""

# The first batch of each query, from the population's end (the marker's end_at).
FIRST_TS = """
UPDATE bench_queries SET first_ts = :end_at - make_interval(secs => end_offset_s)
  - make_interval(secs => interval_s * (:b - 1)) + make_interval(secs => (q * 7 % 1000) / 1000.0)
"""

# One chunk: every batch of every query with a timestamp in [t0, t1), time-ordered.
CHUNK = """
CREATE TEMP TABLE bench_chunk ON COMMIT DROP AS
SELECT x.*, 200 + x.h % 1800 + CASE WHEN x.h % 997 = 0 THEN 20000 + x.h % 40000 ELSE 0 END AS d,
       100 + (x.h / 7) % 5000 AS n
FROM (
  SELECT q.q, q.query_id, r.run_id, g.i, q.interval_s,
         q.first_ts + g.i * make_interval(secs => q.interval_s) AS ts,
         (hashint8(q.q::bigint * 1000003 + g.i) & 2147483647)::bigint AS h
  FROM bench_queries q
  CROSS JOIN LATERAL generate_series(
    greatest(0, ceil(extract(epoch FROM (:t0 - q.first_ts)) / q.interval_s)::int),
    least(:b - 1, ceil(extract(epoch FROM (:t1 - q.first_ts)) / q.interval_s)::int - 1)) AS g(i)
  JOIN bench_runs r ON r.q = q.q AND r.ri = (g.i::bigint * q.runs) / :b
) x
ORDER BY x.ts, x.q
"""

BATCHES = """
INSERT INTO batches (run_id, batch_id, query_id, timestamp, batch_duration_ms, num_input_rows,
  input_rows_per_second, processed_rows_per_second, add_batch_ms, get_batch_ms, latest_offset_ms,
  get_offset_ms, query_planning_ms, wal_commit_ms, commit_offsets_ms, trigger_execution_ms,
  duration_ms, event_time_min, event_time_max, event_time_avg, watermark, observed_metrics)
SELECT run_id, i, query_id, ts, d, n, n::float8 / interval_s, n * 1000.0 / d, d * 7 / 10,
  1 + h % 5, 2 + h % 20, NULL, 20 + h % 60, 20 + (h / 3) % 100, 20 + (h / 5) % 80, d,
  jsonb_build_object('addBatch', d * 7 / 10, 'commitOffsets', 20 + (h / 5) % 80,
    'getBatch', 1 + h % 5, 'latestOffset', 2 + h % 20, 'queryPlanning', 20 + h % 60,
    'triggerExecution', d, 'walCommit', 20 + (h / 3) % 100),
  ts - make_interval(secs => interval_s), ts - interval '1 second',
  ts - make_interval(secs => interval_s / 2.0), ts - make_interval(secs => interval_s + 10),
  '{}'::jsonb
FROM bench_chunk ORDER BY ts, q
"""

OPERATORS = """
INSERT INTO operator_batches (run_id, batch_id, operator_index, query_id, timestamp,
  operator_name, num_rows_total, num_rows_updated, all_updates_time_ms, num_rows_removed,
  all_removals_time_ms, commit_time_ms, memory_used_bytes, num_rows_dropped_by_watermark,
  num_shuffle_partitions, num_state_store_instances, custom_metrics)
SELECT c.run_id, c.i, o.operator_index, c.query_id, c.ts, t.operator_name, x.total,
  (c.h / 11) % 500, (c.h / 13) % 300, (c.h / 17) % 400, (c.h / 19) % 100, 5 + (c.h / 23) % 200,
  x.total * 120, CASE WHEN c.h % 50 = 0 THEN c.h % 30 ELSE 0 END, t.num_shuffle_partitions,
  t.num_state_store_instances,
  t.custom_metrics || jsonb_build_object(t.varied_a, c.i, t.varied_b, x.total * 96)
FROM bench_chunk c
JOIN bench_query_ops o ON o.q = c.q
JOIN bench_op_templates t ON t.provider = o.provider AND t.kind = o.kind
CROSS JOIN LATERAL (
  SELECT 50000 + (c.q * 37 % 1000) * 100 + (c.i % 2000) * 25 + o.operator_index * 7 AS total
) x
ORDER BY c.ts, c.q, o.operator_index
"""

SOURCES = """
INSERT INTO source_batches (run_id, batch_id, source_index, query_id, timestamp, description,
  start_offset, end_offset, latest_offset, num_input_rows, input_rows_per_second,
  processed_rows_per_second, metrics)
SELECT c.run_id, c.i, 0, c.query_id, c.ts, t.source_description,
  jsonb_build_object('logOffset', c.i), jsonb_build_object('logOffset', c.i + 1), NULL, c.n,
  c.n::float8 / c.interval_s, c.n * 1000.0 / c.d, '{}'::jsonb
FROM bench_chunk c CROSS JOIN bench_io_templates t ORDER BY c.ts, c.q
"""

SINKS = """
INSERT INTO sink_batches (run_id, batch_id, query_id, timestamp, description, num_output_rows,
  metrics)
SELECT c.run_id, c.i, c.query_id, c.ts, t.sink_description, c.n, '{}'::jsonb
FROM bench_chunk c CROSS JOIN bench_io_templates t ORDER BY c.ts, c.q
"""

CHUNK_STATEMENTS = (CHUNK, BATCHES, OPERATORS, SOURCES, SINKS)

# ts of batch i of run r's query, as in CHUNK.
_AT = "q.first_ts + {i} * make_interval(secs => q.interval_s)"
_ENDED = "r.status <> 'running'"

RUNS = f"""
INSERT INTO query_runs (run_id, query_id, name, app_name, app_id, spark_version, job_tags,
  started_at, ended_at, exception, error_class, status, last_event_at)
SELECT r.run_id, q.query_id, q.name, q.app_name, q.app_id, '4.3.0', '[]'::jsonb,
  CASE WHEN q.q % 13 = 0 AND r.ri = 0 THEN NULL
       ELSE {_AT.format(i='r.first_i')} - interval '20 seconds' END,
  CASE WHEN {_ENDED} THEN {_AT.format(i='r.last_i')} + interval '2 seconds' END,
  CASE WHEN r.failed THEN t.exception END,
  CASE WHEN r.failed THEN 'STREAM_FAILED' END, r.status,
  {_AT.format(i='r.last_i')} + CASE WHEN {_ENDED} THEN interval '2 seconds' ELSE interval '0' END
FROM bench_runs r JOIN bench_queries q ON q.q = r.q CROSS JOIN bench_io_templates t
ORDER BY 8 NULLS FIRST
"""

PLANS = f"""
INSERT INTO operator_plans (run_id, operator_index, query_id, read_at, batch_id, source, note,
  operator_name, kind, node, operator_id, keys, output_mode, watermark_column,
  watermark_delay_ms, num_state_stores, state_store_provider, checkpoint_location, details,
  settings)
SELECT r.run_id, o.operator_index, q.query_id,
  {_AT.format(i='r.first_i')} + interval '5 seconds', r.first_i, 'plan', NULL,
  t.operator_name, t.plan->>'kind', t.plan->>'node', (t.plan->>'operator_id')::int,
  t.plan->'keys', t.plan->>'output_mode', t.plan->>'watermark_column',
  (t.plan->>'watermark_delay_ms')::bigint, (t.plan->>'num_state_stores')::int,
  t.provider, 's3://checkpoints/' || q.query_id || '/state/' || o.operator_index,
  t.plan->'details', t.plan->'settings'
FROM bench_runs r JOIN bench_queries q ON q.q = r.q JOIN bench_query_ops o ON o.q = r.q
JOIN bench_op_templates t ON t.provider = o.provider AND t.kind = o.kind
"""

# Each run's batch count, as the writer keeps it (and migration 0007 backfills it).
RUN_BATCH_COUNTS = """
UPDATE query_runs SET batches = counted.n
FROM (SELECT run_id, count(*) AS n FROM batches GROUP BY run_id) AS counted
WHERE query_runs.run_id = counted.run_id
"""

# Stall marks: a third of the runs stalled once mid-run for 10 min; terminated queries'
# last runs every 50th query are still marked stalled (never cleared).
_MID = "((r.first_i + r.last_i) / 2)"
STALLS = f"""
INSERT INTO query_stalls (run_id, detected_at, query_id, name, app_name, app_id, last_event_at,
  threshold_seconds, cleared_at)
SELECT r.run_id, {_AT.format(i=_MID)} + make_interval(secs => 5 * q.interval_s), q.query_id,
  q.name, q.app_name, q.app_id, {_AT.format(i=_MID)}, 5 * q.interval_s,
  {_AT.format(i=_MID)} + make_interval(secs => 5 * q.interval_s) + interval '10 minutes'
FROM bench_runs r JOIN bench_queries q ON q.q = r.q WHERE (r.q + r.ri) % 3 = 0
UNION ALL
SELECT r.run_id, {_AT.format(i='r.last_i')} + make_interval(secs => 5 * q.interval_s),
  q.query_id, q.name, q.app_name, q.app_id, {_AT.format(i='r.last_i')}, 5 * q.interval_s, NULL
FROM bench_runs r JOIN bench_queries q ON q.q = r.q
WHERE q.q % 50 = 0 AND r.ri = q.runs - 1
"""

# The rollups are the product's own aggregates (sparkwatch.history.rollups, what the collector's
# job and the listener's history sink compute), as INSERT ... SELECT: see rollup_inserts.

# Constraints and indexes of the bulk tables, dropped while loading and recreated after.
CONSTRAINTS = """
SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid)
FROM pg_constraint WHERE conrelid = ANY(CAST(:tables AS regclass[])) AND contype IN ('p', 'f')
ORDER BY contype DESC, conrelid::regclass::text, conname
"""
INDEXES = """
SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
FROM pg_index i WHERE i.indrelid = ANY(CAST(:tables AS regclass[]))
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
ORDER BY 1
"""


def rollup_inserts(resolution: str, seconds: int, since: datetime) -> list[sa.Insert]:
    """The product's rollup aggregates over every batch since ``since``, inserted server-side
    (the job fetches them and upserts; same values, no round trip of millions of rows)."""
    return [_insert(QueryRollup, rollups.query_aggregates("postgresql", seconds, since),
                    resolution),
            _insert(OperatorRollup, rollups.operator_aggregates("postgresql", seconds, since),
                    resolution)]


def day_rollup_inserts(since: datetime) -> list[sa.Insert]:
    """The product's day rollups, from the hour rollups (insert those first)."""
    return [_insert(QueryRollup, rollups.query_days("postgresql", since), rollups.DAY),
            _insert(OperatorRollup, rollups.operator_days("postgresql", since), rollups.DAY)]


def _insert(model: type, aggregates: sa.Select[Any], resolution: str) -> sa.Insert:
    sub = aggregates.subquery()
    values = [c for c in sub.c if c.name != "bucket"]
    select = sa.select(*values, sa.literal(resolution), sa.func.to_timestamp(sub.c.bucket))
    names = [c.name for c in values] + ["resolution", "bucket_start"]
    return sa.insert(model).from_select(names, select)
