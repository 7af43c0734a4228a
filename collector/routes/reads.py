"""The history read API (/api/v1/queries/..., /api/v1/stalls), scoped to the caller's tenant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import APIRouter, Query

from sparkwatch.collector import models
from sparkwatch.collector.reads import Reads
from sparkwatch.collector.routes.common import errors


def _utc(value: datetime | None) -> datetime | None:
    """Times without a zone are UTC, like everything in the history."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


Limit = Query(100, ge=1, le=1000, description="Page size.")
Offset = Query(0, ge=0, le=1_000_000, description="Rows to skip (paging).")
Since = Query(None, description="Start of the range (inclusive), ISO-8601; without it the "
              "newest rows are returned.")
Until = Query(None, description="End of the range (exclusive), ISO-8601.")


def router(reads: Reads, read_auth: list[Any], Scope: Any) -> APIRouter:  # noqa: N803
    routes = APIRouter()

    def get(path: str, model: Any, summary: str) -> Callable[[Any], Any]:
        return routes.get(path, tags=["history"], response_model=model, summary=summary,
                          dependencies=read_auth, responses=errors(401, 404, 503))

    @get("/api/v1/queries", list[models.QuerySummary], "Every query with its latest run")
    def queries(limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        return [_dump(q) for q in reads.queries(limit, offset, tenant)]

    @get("/api/v1/queries/{query}/runs", list[models.RunSummary], "The runs of one query")
    def runs(query: str, limit: int = Limit, offset: int = Offset,
             tenant: str | None = Scope) -> Any:
        return [_dump(r) for r in reads.runs(query, limit, offset, tenant)]

    @get("/api/v1/queries/{query}/state", list[models.StatePoint],
         "State operators of one query over time")
    def state(query: str, operator: int | None = Query(None, ge=0, le=10_000),
              since: datetime | None = Since, until: datetime | None = Until,
              limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        return [_dump(p) for p in reads.state(query, operator, _utc(since), _utc(until), limit,
                                              offset, tenant)]

    @get("/api/v1/queries/{query}/progress", list[models.ProgressPoint],
         "Per-batch progress of one query over time")
    def progress(query: str, since: datetime | None = Since, until: datetime | None = Until,
                 limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        return reads.progress(query, _utc(since), _utc(until), limit, offset, tenant)

    @get("/api/v1/queries/{query}/rollups", list[models.Rollup],
         "Per-minute or per-hour aggregates of a query, or of one of its operators")
    def rollups(query: str, resolution: Literal["minute", "hour", "day"] = "minute",
                operator: int | None = Query(None, ge=0, le=10_000),
                since: datetime | None = Since, until: datetime | None = Until,
                limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        return reads.rollups(query, resolution, operator, _utc(since), _utc(until), limit,
                             offset, tenant)

    @get("/api/v1/queries/{query}/plans", list[models.QueryPlan],
         "Operator identity of each run of one query (from its executed plan), latest first")
    def plans(query: str, limit: int = Limit, offset: int = Offset,
              tenant: str | None = Scope) -> Any:
        return reads.plans(query, limit, offset, tenant)

    @get("/api/v1/stalls", list[models.Stall], "Stall marks, newest first")
    def stalls(open: bool = Query(False, description="only stalls not yet cleared"),
               limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        return reads.stalls(open, limit, offset, tenant)

    return routes


def _dump(view: Any) -> dict[str, Any]:
    return {name: getattr(view, name) for name in view.__dataclass_fields__}
