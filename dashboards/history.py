"""History: long-range views from the SQL history (PostgreSQL datasource, our schema).

Raw tables (``query_runs``, ``batches``, ``operator_batches``) are written by the listener and by
the collector; ``operator_rollups`` and ``query_stalls`` only by the collector's jobs, which keep
hourly aggregates after retention deleted raw rows.
"""

from __future__ import annotations

from typing import Any

from sparkwatch.dashboards import panels as p
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.skeleton import assemble, new_dashboard
from sparkwatch.dashboards.sql import POSTGRES, Sql
from sparkwatch.dashboards.variables import SQL_APP, SQL_QUERY, history_variables

UID = "sparkwatch-history"
TITLE = "History"
QUERY_NAME = "coalesce(r.name, r.query_id)"
OPERATOR_NAME = f"{QUERY_NAME} || ' ' || ob.operator_name || ' #' || ob.operator_index"
RUN_FILTER = f"{SQL_APP} AND {SQL_QUERY}"
OPERATOR_FROM = f"""
FROM operator_batches ob
JOIN query_runs r ON r.run_id = ob.run_id
WHERE $__timeFilter(ob.timestamp) AND {RUN_FILTER} AND ob.operator_name IN ($operator)"""
BATCH_FROM = f"""
FROM batches b
JOIN query_runs r ON r.run_id = b.run_id
WHERE $__timeFilter(b.timestamp) AND {RUN_FILTER}"""


def _daily(title: str, description: str, sql: str, unit: str = "short") -> Any:
    return p.graph(
        title, description, [Sql(sql, "time_series")], unit, bars=True, datasource=POSTGRES, width=8
    )


def state_panels() -> list[Any]:
    per_day = f"""
SELECT date_trunc('day', ob.timestamp) AS time, {OPERATOR_NAME} AS metric,
       (array_agg(ob.num_rows_total ORDER BY ob.timestamp DESC))[1] AS last_rows,
       (array_agg(ob.num_rows_total ORDER BY ob.timestamp))[1] AS first_rows{OPERATOR_FROM}
GROUP BY 1, 2"""
    return [
        _daily(
            "State rows gained per day, per operator",
            "Rows in state at the end of each day minus the end of the previous day (or the "
            "day's first batch). A query whose state gains every day, day after day, has no "
            "effective eviction: see the unbounded-state runbook.",
            f"""
SELECT time, metric,
       last_rows - coalesce(lag(last_rows) OVER (PARTITION BY metric ORDER BY time), first_rows)
         AS "rows gained"
FROM ({per_day}
) d
ORDER BY 1""",
        ),
        _daily(
            "State rows per day, per operator (max)",
            "The largest state each operator held each day (raw batches; the collector deletes "
            "them after its retention, see the hourly panel for longer ranges).",
            f"""
SELECT date_trunc('day', ob.timestamp) AS time, {OPERATOR_NAME} AS metric,
       max(ob.num_rows_total) AS "rows"{OPERATOR_FROM}
GROUP BY 1, 2
ORDER BY 1""",
        ),
        _daily(
            "Late rows dropped per day, per operator",
            "Rows each operator dropped as later than its watermark, per day. Steady drops mean "
            "the watermark delay is shorter than the data's lateness.",
            f"""
SELECT date_trunc('day', ob.timestamp) AS time, {OPERATOR_NAME} AS metric,
       sum(ob.num_rows_dropped_by_watermark) AS "late rows"{OPERATOR_FROM}
GROUP BY 1, 2
ORDER BY 1""",
        ),
        p.graph(
            "State rows per hour, per operator (collector rollups)",
            "Hourly maximum of state rows from the collector's rollups, kept for months after "
            "raw batches are deleted. Empty without the collector.",
            [
                # The selected queries first (each named by its latest run), then their rollups
                # by primary key; not a lookup of the latest run per rollup row of every query.
                Sql(
                    f"""
SELECT o.bucket_start AS time,
       coalesce(r.name, o.query_id) || ' ' || o.operator_name || ' #' || o.operator_index
         AS metric,
       max(o.num_rows_total_max) AS "rows"
FROM (
  SELECT DISTINCT ON (query_id) name, query_id, app_name FROM query_runs
  ORDER BY query_id, last_event_at DESC
) r
JOIN operator_rollups o ON o.query_id = r.query_id
WHERE o.resolution = 'hour' AND $__timeFilter(o.bucket_start) AND {RUN_FILTER}
  AND o.operator_name IN ($operator)
GROUP BY 1, 2
ORDER BY 1""",
                    "time_series",
                )
            ],
            datasource=POSTGRES,
            width=24,
        ),
    ]


def run_panels() -> list[Any]:
    runs = f"""
SELECT coalesce(r.started_at, r.last_event_at) AS "started", r.ended_at AS "ended",
       r.app_name AS "app", {QUERY_NAME} AS "query", r.status AS "status",
       r.error_class AS "error class", left(r.exception, 4000) AS "exception",
       r.spark_version AS "Spark", r.run_id AS "run id"
FROM query_runs r
WHERE r.last_event_at >= $__timeFrom() AND coalesce(r.started_at, r.last_event_at) <= $__timeTo()
  AND {RUN_FILTER}
ORDER BY 1 DESC
LIMIT 500"""
    return [
        p.grid(
            "Runs and restarts, with their exceptions",
            "Every run (start or restart) of the selected queries in the time range, newest "
            "first. A failed run shows Spark's exception: read its first lines and error class, "
            "then the query failed runbook.",
            [Sql(runs)],
            datasource=POSTGRES,
            height=9,
        ),
        _daily(
            "Runs started and failed per day",
            "Starts per day per query (a restart is a new run) and how many of them ended "
            "failed. Daily restarts of a streaming query usually hide a crash loop.",
            f"""
SELECT date_trunc('day', coalesce(r.started_at, r.last_event_at)) AS time,
       {QUERY_NAME} AS metric,
       count(*) AS "runs", count(*) FILTER (WHERE r.status = 'failed') AS "failed"
FROM query_runs r
WHERE coalesce(r.started_at, r.last_event_at) BETWEEN $__timeFrom() AND $__timeTo()
  AND {RUN_FILTER}
GROUP BY 1, 2
ORDER BY 1""",
        ).span(12),
        p.grid(
            "Stalls detected by the collector",
            "Runs the collector marked stalled (no progress and no idle event for N trigger "
            "intervals) and when they resumed. Empty without the collector.",
            [
                Sql("""
SELECT s.detected_at AS "detected", s.cleared_at AS "cleared", s.app_name AS "app",
       coalesce(s.name, s.query_id) AS "query", s.last_event_at AS "last event",
       s.threshold_seconds AS "threshold (s)", s.run_id AS "run id"
FROM query_stalls s
WHERE s.detected_at BETWEEN $__timeFrom() AND $__timeTo()
  AND s.app_name IN ($app) AND coalesce(s.name, s.query_id) IN ($query)
ORDER BY 1 DESC
LIMIT 200""")
            ],
            datasource=POSTGRES,
            width=12,
            height=8,
        ),
    ]


def batch_panels() -> list[Any]:
    slowest = f"""
SELECT b.timestamp AS "time", {QUERY_NAME} AS "query", b.batch_id AS "batch",
       b.batch_duration_ms / 1000.0 AS "duration", b.num_input_rows AS "input rows",
       b.add_batch_ms / 1000.0 AS "addBatch", b.query_planning_ms / 1000.0 AS "queryPlanning",
       coalesce(b.latest_offset_ms, b.get_offset_ms) / 1000.0 AS "latestOffset",
       b.get_batch_ms / 1000.0 AS "getBatch", b.wal_commit_ms / 1000.0 AS "walCommit",
       b.commit_offsets_ms / 1000.0 AS "commitOffsets", r.run_id AS "run id"{BATCH_FROM}
ORDER BY b.batch_duration_ms DESC
LIMIT 50"""
    table = p.grid(
        "Slowest batches",
        "The 50 longest micro-batches in the time range with their phases (seconds). A slow "
        "addBatch is the query's own work (state, shuffles); slow walCommit/commitOffsets "
        "point at the checkpoint storage; slow latestOffset at the source.",
        [Sql(slowest)],
        datasource=POSTGRES,
        height=9,
    )
    hourly = p.graph(
        "Batch duration per hour (p95 and max)",
        "Long-range batch duration from the raw batches: the 95th percentile and the slowest "
        "batch of every hour, per query.",
        [
            Sql(
                f"""
SELECT date_trunc('hour', b.timestamp) AS time, {QUERY_NAME} AS metric,
       percentile_cont(0.95) WITHIN GROUP (ORDER BY b.batch_duration_ms) / 1000.0 AS "p95",
       max(b.batch_duration_ms) / 1000.0 AS "max"{BATCH_FROM}
GROUP BY 1, 2
ORDER BY 1""",
                "time_series",
            )
        ],
        "s",
        datasource=POSTGRES,
        width=24,
    )
    return [table, hourly]


def build(config: Config) -> dict[str, Any]:
    board = (
        new_dashboard(
            UID,
            TITLE,
            "Long-range views from the sparkwatch SQL history (PostgreSQL datasource).",
            history_variables(),
        )
        .time("now-30d", "now")
        .refresh("5m")
    )
    sections = [
        ("State over days", state_panels()),
        ("Runs and restarts", run_panels()),
        ("Batches", batch_panels()),
    ]
    return assemble(board, sections)
