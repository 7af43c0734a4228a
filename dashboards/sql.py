"""SQL targets for Grafana's PostgreSQL datasource (the SDK ships no builder for it).

The JSON is what Grafana 11's ``grafana-postgresql-datasource`` saves for a query written in
code mode: ``rawSql`` with ``rawQuery``, and ``format`` ``table`` or ``time_series`` (time series
need a ``time`` column, a ``metric`` column naming the series, and rows ordered by time).
"""

from __future__ import annotations

from typing import Self

from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import dashboard as dm

POSTGRES_TYPE = "grafana-postgresql-datasource"
POSTGRES = dm.DataSourceRef(type_val=POSTGRES_TYPE, uid="${datasource}")
FORMATS = ("table", "time_series")


class SqlQuery(cogvariants.Dataquery):
    def __init__(self, raw_sql: str, fmt: str, ref_id: str = "") -> None:
        if fmt not in FORMATS:
            raise ValueError(f"SQL format must be one of {FORMATS}, not {fmt!r}")
        self.raw_sql = raw_sql
        self.format = fmt
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


class Sql(cogbuilder.Builder[cogvariants.Dataquery]):
    """``Sql(text, "time_series")``, used like the SDK's query builders."""

    def __init__(self, raw_sql: str, fmt: str = "table") -> None:
        self._internal = SqlQuery(raw_sql.strip(), fmt)

    def ref_id(self, ref_id: str) -> Self:
        self._internal.ref_id = ref_id
        return self

    def build(self) -> SqlQuery:
        return self._internal
