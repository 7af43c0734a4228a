"""The History dashboard's SQL in each history backend's dialect, and its Grafana datasource.

The panels (:mod:`history`) are written once over these pieces; what differs is only what the
two databases and their Grafana datasources spell differently:

- PostgreSQL (``grafana-postgresql-datasource``): ``timestamptz`` columns; Grafana's macros
  ``$__timeFrom()``/``$__timeTo()``; ``$var`` expands to a quoted list.
- SQLite (``frser-sqlite-datasource``): times are stored as UTC text ``YYYY-MM-DD
  HH:MM:SS.ffffff`` (SQLAlchemy's SQLite ``DateTime``, :mod:`sparkwatch.history.columns`), which
  sorts like the time, so range filters compare text in that same format (and keep using the
  indexes); the plugin has no time-range macros, only Grafana's ``$__from``/``$__to`` (epoch
  milliseconds); result times must be epoch seconds, named in the target's ``timeColumns``;
  ``${var:sqlstring}`` expands to a list of SQL strings (quotes doubled), where a bare ``$var``
  would be a ``{a,b}`` glob.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from grafana_foundation_sdk.models import dashboard as dm

from sparkwatch.dashboards.sql import (
    POSTGRES,
    POSTGRES_TYPE,
    SQLITE,
    SQLITE_TYPE,
    Sql,
    SqliteSql,
)


class Dialect(Protocol):
    name: str
    label: str
    datasource_type: str
    datasource: dm.DataSourceRef
    materialized: str
    """`` MATERIALIZED`` where a CTE must be computed once (PostgreSQL), else empty."""

    def var(self, name: str) -> str:
        """A multi-value template variable as a list of SQL strings (for ``IN (...)``)."""

    def time_from(self, earlier: str = "") -> str:
        """The range's start as a value comparable with stored times; ``earlier`` "1 day"/"1 hour"
        moves it back by that much."""

    def time_to(self) -> str: ...

    def as_time(self, column: str) -> str:
        """A stored time as a result column Grafana shows as a time."""

    def day(self, column: str) -> str:
        """The UTC day of a stored time, as a result time."""

    def plus_hour(self, column: str) -> str:
        """A stored time one hour later, comparable with stored times."""

    def head(self, text: str, length: int) -> str:
        """The first ``length`` characters."""

    def latest_runs(self) -> str:
        """The body of a CTE: each query's latest run (query_id, name, app_name)."""

    def latest_operators(self, run_filter: str) -> str:
        """The operator names of the latest batch of each selected query's latest run."""

    def target(self, sql: str, fmt: str = "table", times: Sequence[str] = ()) -> Sql:
        """A panel target; ``times`` name the result's time columns (``time`` for series)."""


class Postgres:
    name = "postgresql"
    label = "PostgreSQL history"
    datasource_type = POSTGRES_TYPE
    datasource = POSTGRES
    materialized = " MATERIALIZED"

    def var(self, name: str) -> str:
        return f"${name}"

    def time_from(self, earlier: str = "") -> str:
        return f"$__timeFrom()::timestamptz - interval '{earlier}'" if earlier else "$__timeFrom()"

    def time_to(self) -> str:
        return "$__timeTo()"

    def as_time(self, column: str) -> str:
        return column

    def day(self, column: str) -> str:
        return f"date_trunc('day', {column})"

    def plus_hour(self, column: str) -> str:
        return f"{column} + interval '1 hour'"

    def head(self, text: str, length: int) -> str:
        return f"left({text}, {length})"

    def latest_runs(self) -> str:
        return """
  SELECT DISTINCT ON (query_id) query_id, name, app_name FROM query_runs
  ORDER BY query_id, last_event_at DESC
"""

    def latest_operators(self, run_filter: str) -> str:
        # Two primary-key lookups per query (not per run, nor every operator row). The latest
        # batch is looked for in the day before the run's last event first: on PostgreSQL's
        # daily partitions (migration 0009) that reads one or two days' index, not every day's
        # (the whole run's only when that day has none).
        return (
            "SELECT DISTINCT ob.operator_name FROM (SELECT DISTINCT ON (query_id) run_id, "
            "query_id, name, app_name, last_event_at FROM query_runs ORDER BY query_id, "
            "last_event_at DESC) r "
            "CROSS JOIN LATERAL ((SELECT l.batch_id, l.timestamp FROM batches l "
            "WHERE l.run_id = r.run_id AND l.timestamp > r.last_event_at - interval '1 day' "
            "AND l.timestamp <= r.last_event_at ORDER BY l.batch_id DESC LIMIT 1) UNION ALL "
            "(SELECT l.batch_id, l.timestamp FROM batches l WHERE l.run_id = r.run_id "
            "ORDER BY l.batch_id DESC LIMIT 1) LIMIT 1) last "
            "JOIN operator_batches ob ON ob.run_id = r.run_id AND ob.batch_id = last.batch_id "
            "AND ob.timestamp = last.timestamp "
            f"WHERE {run_filter} ORDER BY 1"
        )

    def target(self, sql: str, fmt: str = "table", times: Sequence[str] = ()) -> Sql:
        return Sql(sql, fmt)


# Epoch seconds (milliseconds kept) as the stored text format, e.g. '2026-11-18 00:10:00.000000'.
def _stored(seconds: str, *modifiers: str) -> str:
    extra = "".join(f", '{m}'" for m in modifiers)
    return f"strftime('%Y-%m-%d %H:%M:%f', {seconds}, 'unixepoch'{extra}) || '000'"


class Sqlite:
    name = "sqlite"
    label = "SQLite history"
    datasource_type = SQLITE_TYPE
    datasource = SQLITE
    materialized = ""  # SQLite materializes a CTE read more than once by itself

    def var(self, name: str) -> str:
        return f"${{{name}:sqlstring}}"

    def time_from(self, earlier: str = "") -> str:
        return _stored("$__from / 1000.0", *([f"-{earlier}"] if earlier else []))

    def time_to(self) -> str:
        return _stored("$__to / 1000.0")

    def as_time(self, column: str) -> str:
        # julianday() keeps milliseconds; rounded, the float error of the conversion is gone.
        return f"round((julianday({column}) - 2440587.5) * 86400.0, 3)"

    def day(self, column: str) -> str:
        return f"CAST(strftime('%s', {column}, 'start of day') AS INTEGER)"

    def plus_hour(self, column: str) -> str:
        # Whole seconds, no fraction: sorts before every stored time of that second, so ``<`` it
        # is ``<`` the hour's end exactly (bucket starts are whole hours).
        return f"datetime({column}, '+1 hour')"

    def head(self, text: str, length: int) -> str:
        return f"substr({text}, 1, {length})"

    def latest_runs(self) -> str:
        return """
  SELECT query_id, name, app_name FROM (
    SELECT query_id, name, app_name,
           row_number() OVER (PARTITION BY query_id ORDER BY last_event_at DESC) AS latest
    FROM query_runs
  ) WHERE latest = 1
"""

    def latest_operators(self, run_filter: str) -> str:
        # A run's state operators are fixed by its plan, so its latest batch (a primary-key
        # lookup) names them all.
        return (
            "SELECT DISTINCT ob.operator_name FROM (SELECT run_id, query_id, name, app_name, "
            "row_number() OVER (PARTITION BY query_id ORDER BY last_event_at DESC) AS latest "
            "FROM query_runs) r "
            "JOIN operator_batches ob ON ob.run_id = r.run_id AND ob.batch_id = "
            "(SELECT max(l.batch_id) FROM batches l WHERE l.run_id = r.run_id) "
            f"WHERE r.latest = 1 AND {run_filter} ORDER BY 1"
        )

    def target(self, sql: str, fmt: str = "table", times: Sequence[str] = ()) -> Sql:
        return SqliteSql(sql, fmt, times or (("time",) if fmt == "time_series" else ()))


POSTGRESQL: Dialect = Postgres()
SQLITE_DIALECT: Dialect = Sqlite()
