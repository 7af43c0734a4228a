"""Template variables: datasource, (tenant,) app, query, operator, for Prometheus and the history.

Prometheus variables are regexes (``All`` is ``.*``, which also matches the empty name of an
unnamed query); SQL variables expand to quoted lists for ``IN (...)`` (spelled per history
backend, :mod:`sql_dialects`).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from sparkwatch.dashboards.panels import PROMETHEUS
from sparkwatch.dashboards.promql import APP_FILTER, QUERY_FILTER, TENANT_FILTER, sel
from sparkwatch.dashboards.sql_dialects import POSTGRESQL, Dialect
from sparkwatch.metrics import catalogue as cat


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


def sql_filters(d: Dialect) -> tuple[str, str]:
    """The app and query filters on the variables, shared by every History query
    (r = query_runs)."""
    return (f"r.app_name IN ({d.var('app')})",
            f"coalesce(r.name, r.query_id) IN ({d.var('query')})")


def history_variables(d: Dialect = POSTGRESQL) -> list[db.DatasourceVariable | db.QueryVariable]:
    runs = "FROM query_runs r"
    app, query = sql_filters(d)
    return [
        db.DatasourceVariable("datasource").label(d.label).type(d.datasource_type),
        _choice("app", "App", f"SELECT DISTINCT r.app_name {runs} ORDER BY 1", d.datasource),
        _choice(
            "query",
            "Query",
            f"SELECT DISTINCT coalesce(r.name, r.query_id) {runs} WHERE {app} ORDER BY 1",
            d.datasource,
        ),
        _choice("operator", "Operator", d.latest_operators(f"{app} AND {query}"), d.datasource),
    ]
