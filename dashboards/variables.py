"""Template variables: datasource, (tenant,) app, query, operator, for Prometheus and the history.

Prometheus variables are regexes (``All`` is ``.*``, which also matches the empty name of an
unnamed query); SQL variables expand to quoted lists for ``IN ($var)``.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from sparkwatch.dashboards.panels import PROMETHEUS
from sparkwatch.dashboards.promql import APP_FILTER, QUERY_FILTER, TENANT_FILTER, sel
from sparkwatch.dashboards.sql import POSTGRES, POSTGRES_TYPE
from sparkwatch.metrics import catalogue as cat

# SQL filters on the variables, shared by every History query (r = query_runs).
SQL_APP = "r.app_name IN ($app)"
SQL_QUERY = "coalesce(r.name, r.query_id) IN ($query)"


def _choice(name: str, label: str, query: str, datasource: dm.DataSourceRef) -> db.QueryVariable:
    return (
        db.QueryVariable(name)
        .label(label)
        .datasource(datasource)
        .query(query)
        .multi(True)
        .include_all(True)
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
        .current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
    )


def prometheus_variables() -> list[db.DatasourceVariable | db.QueryVariable]:
    info = cat.QUERY_INFO
    return [
        db.DatasourceVariable("datasource").label("Prometheus").type("prometheus"),
        _choice("tenant", "Tenant", f"label_values({info.name}, tenant)", PROMETHEUS)
        .all_value(".*"),
        _choice("app", "App", f"label_values({sel(info, TENANT_FILTER)}, app_name)", PROMETHEUS)
        .all_value(".*"),
        _choice(
            "query",
            "Query",
            f"label_values({sel(info, APP_FILTER)}, query_name)",
            PROMETHEUS,
        ).all_value(".*"),
        _choice(
            "operator",
            "Operator",
            f"label_values({sel(cat.STATE_ROWS, QUERY_FILTER)}, operator)",
            PROMETHEUS,
        ).all_value(".*"),
    ]


def history_variables() -> list[db.DatasourceVariable | db.QueryVariable]:
    runs = "FROM query_runs r"
    # A run's state operators are fixed by its plan, so its latest batch names them all; and a
    # query's operators are its latest run's: two primary-key lookups per query (not per run,
    # nor every operator row of the history). The latest batch is looked for in the day before
    # the run's last event first: on PostgreSQL's daily partitions (migration 0009) that reads
    # one or two days' index, not every day's (the whole run's only when that day has none).
    operators = (
        "SELECT DISTINCT ob.operator_name FROM (SELECT DISTINCT ON (query_id) run_id, query_id, "
        "name, app_name, last_event_at FROM query_runs ORDER BY query_id, last_event_at DESC) r "
        "CROSS JOIN LATERAL ((SELECT l.batch_id, l.timestamp FROM batches l "
        "WHERE l.run_id = r.run_id AND l.timestamp > r.last_event_at - interval '1 day' "
        "AND l.timestamp <= r.last_event_at ORDER BY l.batch_id DESC LIMIT 1) UNION ALL "
        "(SELECT l.batch_id, l.timestamp FROM batches l WHERE l.run_id = r.run_id "
        "ORDER BY l.batch_id DESC LIMIT 1) LIMIT 1) last "
        "JOIN operator_batches ob ON ob.run_id = r.run_id AND ob.batch_id = last.batch_id "
        "AND ob.timestamp = last.timestamp "
        f"WHERE {SQL_APP} AND {SQL_QUERY} ORDER BY 1"
    )
    return [
        db.DatasourceVariable("datasource").label("PostgreSQL history").type(POSTGRES_TYPE),
        _choice("app", "App", f"SELECT DISTINCT r.app_name {runs} ORDER BY 1", POSTGRES),
        _choice(
            "query",
            "Query",
            f"SELECT DISTINCT coalesce(r.name, r.query_id) {runs} WHERE {SQL_APP} ORDER BY 1",
            POSTGRES,
        ),
        _choice("operator", "Operator", operators, POSTGRES),
    ]
