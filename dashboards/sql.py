"""SQL targets for Grafana's SQL datasources (the SDK ships no builder for them).

PostgreSQL: the JSON is what Grafana 11's ``grafana-postgresql-datasource`` saves for a query
written in code mode: ``rawSql`` with ``rawQuery``, and ``format`` ``table`` or ``time_series``
(time series need a ``time`` column, a ``metric`` column naming the series, and rows ordered by
time).

SQLite: the community plugin ``frser-sqlite-datasource`` (it opens a database file on Grafana's
host). Its query model: ``rawQueryText`` (what the user wrote; its frontend puts the text with the
template variables replaced into ``queryText``, which its backend runs), ``queryType`` ``table`` or
``time series`` (long rows become one series per string column value, ordered by time), and
``timeColumns``, the result columns it turns into times: SQLite has no time type, so these must
be epoch seconds (numbers) or RFC 3339 text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import dashboard as dm

POSTGRES_TYPE = "grafana-postgresql-datasource"
POSTGRES = dm.DataSourceRef(type_val=POSTGRES_TYPE, uid="${datasource}")
SQLITE_TYPE = "frser-sqlite-datasource"
SQLITE = dm.DataSourceRef(type_val=SQLITE_TYPE, uid="${datasource}")
FORMATS = ("table", "time_series")
# Our format names -> the SQLite plugin's query types.
SQLITE_QUERY_TYPES = {"table": "table", "time_series": "time series"}


def _checked(fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"SQL format must be one of {FORMATS}, not {fmt!r}")
    return fmt


class SqlQuery(cogvariants.Dataquery):
    def __init__(self, raw_sql: str, fmt: str, ref_id: str = "") -> None:
        self.raw_sql = raw_sql
        self.format = _checked(fmt)
        self.ref_id = ref_id

    def to_json(self) -> dict[str, object]:
        return {
            "datasource": POSTGRES.to_json(),
            "editorMode": "code",
            "format": self.format,
            "rawQuery": True,
            "rawSql": self.raw_sql,
            "refId": self.ref_id,
        }


class SqliteQuery(SqlQuery):
    def __init__(self, raw_sql: str, fmt: str, time_columns: Sequence[str]) -> None:
        super().__init__(raw_sql, fmt)
        self.time_columns = list(time_columns)

    def to_json(self) -> dict[str, object]:
        return {
            "datasource": SQLITE.to_json(),
            # The frontend overwrites queryText with rawQueryText's variables replaced; stored
            # too because the backend alone (alerting) runs queryText.
            "queryText": self.raw_sql,
            "queryType": SQLITE_QUERY_TYPES[self.format],
            "rawQueryText": self.raw_sql,
            "refId": self.ref_id,
            "timeColumns": self.time_columns,
        }


class Sql(cogbuilder.Builder[cogvariants.Dataquery]):
    """``Sql(text, "time_series")``, used like the SDK's query builders (PostgreSQL)."""

    def __init__(self, raw_sql: str, fmt: str = "table") -> None:
        self._internal: SqlQuery = SqlQuery(raw_sql.strip(), fmt)

    def ref_id(self, ref_id: str) -> Self:
        self._internal.ref_id = ref_id
        return self

    def build(self) -> SqlQuery:
        return self._internal


class SqliteSql(Sql):
    """A target of the SQLite plugin; ``time_columns`` name the result's epoch-seconds columns."""

    def __init__(self, raw_sql: str, fmt: str = "table", time_columns: Sequence[str] = ()) -> None:
        self._internal = SqliteQuery(raw_sql.strip(), fmt, time_columns)
