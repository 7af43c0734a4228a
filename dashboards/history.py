"""History: long-range views from the SQL history, for PostgreSQL and for SQLite.

Raw tables (``query_runs``, ``batches``, ``operator_batches``) are written by the listener and by
the collector; the rollups by the collector's job or, without a collector, by the listener's
history writer (:mod:`sparkwatch.history.rollups`); ``query_stalls`` only by the collector.
Panels over days read the day and hour rollups, not raw rows: at 10 M progress rows a fleet-wide
range of raw rows takes seconds, its rollups milliseconds (docs/benchmarks.md).

Each panel is defined once here; :func:`build` renders the board for Grafana's PostgreSQL
datasource, :func:`build_sqlite` for the SQLite plugin reading the embedded default history
(``sqlite:///sparkwatch.db``). Only the datasource and the SQL spelling differ
(:mod:`sql_dialects`).
"""

from __future__ import annotations

from typing import Any

from sparkwatch.dashboards import panels as p
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.skeleton import assemble, new_dashboard
from sparkwatch.dashboards.sql_dialects import POSTGRESQL, SQLITE_DIALECT, Dialect
from sparkwatch.dashboards.variables import history_variables, sql_filters

UID = "sparkwatch-history"
TITLE = "History"
SQLITE_UID = "sparkwatch-history-sqlite"
SQLITE_TITLE = "History (SQLite)"
QUERY_NAME = "coalesce(r.name, r.query_id)"
# Panels over every query show the TOP series by the panel's own measure: a graph of thousands
# of lines says less than the 20 that matter (select queries to see others).
TOP = 20


def run_filter(d: Dialect) -> str:
    app, query = sql_filters(d)
    return f"{app} AND {query}"


def selected(d: Dialect) -> str:
    """The selected queries, each named by its latest run (one index pass over the runs, not a
    lookup per rollup row); the fleet-wide panels then read the rollups, not raw rows."""
    return f"""
WITH r AS ({d.latest_runs()}), q AS (
  SELECT r.query_id, {QUERY_NAME} AS query FROM r WHERE {run_filter(d)}
)"""


def overlapping(d: Dialect, bucket_start: str, width: str) -> str:
    """Buckets of ``width`` overlapping the time range (the one it starts in too, so a range
    shorter than a bucket still shows its bucket)."""
    return (f"{bucket_start} > {d.time_from(f'1 {width}')} "
            f"AND {bucket_start} <= {d.time_to()}")


# Every day row of the range, read by the (resolution, bucket_start) index in one pass and only
# then joined with the selected queries: a few ms for the whole fleet, where a lookup per
# selected query (what the planner picks from a join) costs an index descent each.
def day_rows(d: Dialect, name: str, table: str, columns: str, where: str = "") -> str:
    return f""", {name} AS{d.materialized} (
  SELECT {columns} FROM {table} d
  WHERE d.resolution = 'day' AND {overlapping(d, "d.bucket_start", "day")}{where}
)"""


OPERATOR_METRIC = "q.query || ' ' || o.operator_name || ' #' || o.operator_index"
ROLLUPS_NOTE = (
    " From the rollups (written by the collector's rollups job, or by the listener's history "
    "writer when there is no collector), kept after raw batches are deleted; UTC days."
)


def _daily(d: Dialect, title: str, description: str, sql: str, unit: str = "short") -> Any:
    return p.graph(
        title, description, [d.target(sql, "time_series")], unit, bars=True,
        datasource=d.datasource, width=8,
    )


def operator_chosen(d: Dialect) -> str:
    return f" AND d.operator_name IN ({d.var('operator')})"


def daily_top(d: Dialect, value: str, column: str, rank: str) -> str:
    """Per day, ``value`` (over the day rollup ``d``) of the TOP operators by ``rank`` (an
    aggregate of ``s.value``): a few thousand day rows, not hundreds of thousands of hours."""
    columns = ("d.query_id, d.operator_index, d.operator_name, "
               f"{d.as_time('d.bucket_start')} AS time, {value} AS value")
    rows = day_rows(d, "s", "operator_rollups", columns, operator_chosen(d))
    return f"""{selected(d)}{rows}, top AS (
  SELECT query_id, operator_index FROM s JOIN q USING (query_id) GROUP BY 1, 2
  ORDER BY {rank} DESC NULLS LAST, 1, 2 LIMIT {TOP}
)
SELECT s.time, q.query || ' ' || s.operator_name || ' #' || s.operator_index AS metric,
       s.value AS "{column}"
FROM s JOIN top USING (query_id, operator_index) JOIN q USING (query_id)
ORDER BY 1"""


# The day's last state minus the previous day's last (or, on the first day, its first batch's).
GAINED = """d.num_rows_total_last - coalesce(lag(d.num_rows_total_last) OVER (
           PARTITION BY d.query_id, d.operator_index ORDER BY d.bucket_start),
           d.num_rows_total_first)"""


def hourly_state(d: Dialect) -> str:
    """The TOP operators by their largest day in the range, then only their hours (by the index
    on query_id, resolution, bucket_start)."""
    rows = day_rows(d, "s", "operator_rollups",
                    "d.query_id, d.operator_index, d.num_rows_total_max", operator_chosen(d))
    hour = d.as_time("o.bucket_start")
    return f"""{selected(d)}{rows}, top AS (
  SELECT query_id, operator_index FROM s JOIN q USING (query_id)
  GROUP BY 1, 2 ORDER BY max(num_rows_total_max) DESC NULLS LAST, 1, 2 LIMIT {TOP}
)
SELECT {hour} AS time, {OPERATOR_METRIC} AS metric, o.num_rows_total_max AS "rows"
FROM top
JOIN operator_rollups o ON o.query_id = top.query_id AND o.operator_index = top.operator_index
JOIN q ON q.query_id = o.query_id
WHERE o.resolution = 'hour' AND {overlapping(d, "o.bucket_start", "hour")}
  AND o.operator_name IN ({d.var("operator")})
ORDER BY 1"""


def state_panels(d: Dialect) -> list[Any]:
    return [
        _daily(
            d,
            "State rows gained per day, per operator",
            "Rows in state at the end of each day minus the end of the previous day (or the "
            "day's first batch). A query whose state gains every day, day after day, has no "
            f"effective eviction: see the unbounded-state runbook. The {TOP} operators that "
            "gained most over the range." + ROLLUPS_NOTE,
            daily_top(d, GAINED, "rows gained", "sum(s.value)"),
        ),
        _daily(
            d,
            "State rows per day, per operator (max)",
            f"The largest state each operator held each day; the {TOP} largest over the "
            "range." + ROLLUPS_NOTE,
            daily_top(d, "d.num_rows_total_max", "rows", "max(s.value)"),
        ),
        _daily(
            d,
            "Late rows dropped per day, per operator",
            "Rows each operator dropped as later than its watermark, per day. Steady drops mean "
            f"the watermark delay is shorter than the data's lateness. The {TOP} operators "
            "that dropped most over the range." + ROLLUPS_NOTE,
            daily_top(d, "d.num_rows_dropped_by_watermark", "late rows", "sum(s.value)"),
        ),
        p.graph(
            "State rows per hour, per operator",
            f"Hourly maximum of state rows; the {TOP} operators with the largest state over "
            "the range's days." + ROLLUPS_NOTE,
            [d.target(hourly_state(d), "time_series")],
            datasource=d.datasource,
            width=24,
        ),
    ]


def run_panels(d: Dialect) -> list[Any]:
    started = "coalesce(r.started_at, r.last_event_at)"
    runs = f"""
SELECT {d.as_time(started)} AS "started", {d.as_time("r.ended_at")} AS "ended",
       r.app_name AS "app", {QUERY_NAME} AS "query", r.status AS "status",
       r.error_class AS "error class", {d.head("r.exception", 4000)} AS "exception",
       r.spark_version AS "Spark", r.run_id AS "run id"
FROM query_runs r
WHERE r.last_event_at >= {d.time_from()} AND {started} <= {d.time_to()}
  AND {run_filter(d)}
ORDER BY 1 DESC
LIMIT 500"""
    detected, cleared, last = (d.as_time(f"s.{c}")
                               for c in ("detected_at", "cleared_at", "last_event_at"))
    stalls = f"""
SELECT {detected} AS "detected", {cleared} AS "cleared", s.app_name AS "app",
       coalesce(s.name, s.query_id) AS "query", {last} AS "last event",
       s.threshold_seconds AS "threshold (s)", s.run_id AS "run id"
FROM query_stalls s
WHERE s.detected_at BETWEEN {d.time_from()} AND {d.time_to()}
  AND s.app_name IN ({d.var("app")}) AND coalesce(s.name, s.query_id) IN ({d.var("query")})
ORDER BY 1 DESC
LIMIT 200"""
    return [
        p.grid(
            "Runs and restarts, with their exceptions",
            "Every run (start or restart) of the selected queries in the time range, newest "
            "first. A failed run shows Spark's exception: read its first lines and error class, "
            "then the query failed runbook.",
            [d.target(runs, times=("started", "ended"))],
            datasource=d.datasource,
            height=9,
        ),
        _daily(
            d,
            "Runs started and failed per day",
            "Starts per day per query (a restart is a new run) and how many of them ended "
            "failed. Daily restarts of a streaming query usually hide a crash loop.",
            f"""
SELECT {d.day(started)} AS time,
       {QUERY_NAME} AS metric,
       count(*) AS "runs", count(*) FILTER (WHERE r.status = 'failed') AS "failed"
FROM query_runs r
WHERE {started} BETWEEN {d.time_from()} AND {d.time_to()}
  AND {run_filter(d)}
GROUP BY 1, 2
ORDER BY 1""",
        ).span(12),
        p.grid(
            "Stalls detected by the collector",
            "Runs the collector marked stalled (no progress and no idle event for N trigger "
            "intervals) and when they resumed. Empty without the collector.",
            [d.target(stalls, times=("detected", "cleared", "last event"))],
            datasource=d.datasource,
            width=12,
            height=8,
        ),
    ]


def slowest_hours(d: Dialect) -> str:
    """The slowest hours first (index on resolution, batch_duration_ms_max), then only their raw
    rows by the (query_id, timestamp) index. Exact: a batch among the 50 slowest lies in an hour
    whose maximum is at least its duration, so in one of the 50 slowest hours (ties aside)."""
    return f"""
, t AS (
  SELECT h.query_id, h.bucket_start FROM query_rollups h
  WHERE h.resolution = 'hour' AND h.query_id IN (SELECT query_id FROM q)
    AND {overlapping(d, "h.bucket_start", "hour")}
  ORDER BY h.batch_duration_ms_max DESC LIMIT 50
)"""


def batch_panels(d: Dialect) -> list[Any]:
    slowest = f"""{selected(d)}{slowest_hours(d)}
SELECT {d.as_time("b.timestamp")} AS "time", {QUERY_NAME} AS "query", b.batch_id AS "batch",
       b.batch_duration_ms / 1000.0 AS "duration", b.num_input_rows AS "input rows",
       b.add_batch_ms / 1000.0 AS "addBatch", b.query_planning_ms / 1000.0 AS "queryPlanning",
       coalesce(b.latest_offset_ms, b.get_offset_ms) / 1000.0 AS "latestOffset",
       b.get_batch_ms / 1000.0 AS "getBatch", b.wal_commit_ms / 1000.0 AS "walCommit",
       b.commit_offsets_ms / 1000.0 AS "commitOffsets", r.run_id AS "run id"
FROM t
JOIN batches b ON b.query_id = t.query_id AND b.timestamp >= t.bucket_start
  AND b.timestamp < {d.plus_hour("t.bucket_start")}
JOIN query_runs r ON r.run_id = b.run_id
ORDER BY b.batch_duration_ms DESC
LIMIT 50"""
    table = p.grid(
        "Slowest batches",
        "The 50 longest micro-batches in the hours of the time range (whole hours: the first "
        "may start before the range) with their phases (seconds). A slow addBatch is the "
        "query's own work (state, shuffles); slow walCommit/commitOffsets point at the "
        "checkpoint storage; slow latestOffset at the source. The hourly rollups find the "
        "slowest hours, raw batches fill them in: empty once retention deleted the raw rows.",
        [d.target(slowest, times=("time",))],
        datasource=d.datasource,
        height=9,
    )
    days = day_rows(d, "s", "query_rollups", "d.query_id, d.batch_duration_ms_max")
    hourly = p.graph(
        "Batch duration per hour (p95 and max)",
        "The 95th percentile and the slowest batch of every hour, per query; the "
        f"{TOP} queries with the slowest batches over the range's days." + ROLLUPS_NOTE,
        [
            d.target(
                f"""{selected(d)}{days}, top AS (
  SELECT query_id FROM s JOIN q USING (query_id)
  GROUP BY 1 ORDER BY max(batch_duration_ms_max) DESC, 1 LIMIT {TOP}
)
SELECT {d.as_time("h.bucket_start")} AS time, q.query AS metric,
       h.batch_duration_ms_p95 / 1000.0 AS "p95", h.batch_duration_ms_max / 1000.0 AS "max"
FROM top JOIN query_rollups h ON h.query_id = top.query_id JOIN q ON q.query_id = h.query_id
WHERE h.resolution = 'hour' AND {overlapping(d, "h.bucket_start", "hour")}
ORDER BY 1""",
                "time_series",
            )
        ],
        "s",
        datasource=d.datasource,
        width=24,
    )
    return [table, hourly]


def _board(d: Dialect, uid: str, title: str, description: str) -> dict[str, Any]:
    board = (
        new_dashboard(uid, title, description, history_variables(d))
        .time("now-30d", "now")
        .refresh("5m")
    )
    sections = [
        ("State over days", state_panels(d)),
        ("Runs and restarts", run_panels(d)),
        ("Batches", batch_panels(d)),
    ]
    return assemble(board, sections)


def build(config: Config) -> dict[str, Any]:
    return _board(
        POSTGRESQL, UID, TITLE,
        "Long-range views from the sparkwatch SQL history (PostgreSQL datasource).",
    )


def build_sqlite(config: Config) -> dict[str, Any]:
    return _board(
        SQLITE_DIALECT, SQLITE_UID, SQLITE_TITLE,
        "Long-range views from the sparkwatch SQL history in SQLite, the embedded default "
        "(sqlite:///sparkwatch.db), through the frser-sqlite-datasource plugin. The same panels "
        "as History (PostgreSQL).",
    )
