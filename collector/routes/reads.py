"""The history read API (/api/v1/queries/..., /api/v1/stalls), scoped to the caller's tenant."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal, NoReturn

from fastapi import APIRouter, Query
from fastapi.exceptions import RequestValidationError

from sparkwatch.collector import models
from sparkwatch.collector.reads import Reads, ReadSlots
from sparkwatch.collector.routes.common import errors
from sparkwatch.model.contract import LIMITS


def _range(since: datetime | None, until: datetime | None
           ) -> tuple[datetime | None, datetime | None]:
    return _utc(since, "since"), _utc(until, "until")


def _utc(value: datetime | None, name: str) -> datetime | None:
    """Times without a zone are UTC, like everything in the history; a time whose offset takes
    it past year 1 or 9999 once in UTC is refused as the parameter's error (it was a 500)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise RequestValidationError([{
            "type": "value_error", "loc": ("query", name), "input": value.isoformat(),
            "msg": "out of range once in UTC (years 1 to 9999)"}]) from None


def _query(query: str) -> str:
    """The path's query id or name, refused naming the parameter (never echoed: it may be
    megabytes) when empty or longer than any name the history holds; the console does alike."""
    if not query:
        _refuse("an id or name is needed")
    if len(query) > LIMITS.name_chars:
        _refuse(f"string of {len(query)} characters is over the limit of {LIMITS.name_chars}")
    return query


def _run_id(run_id: str) -> str:
    """The path's run id, refused as :func:`_query` refuses a name (never echoed)."""
    if len(run_id) > LIMITS.id_chars:
        _refuse(f"string of {len(run_id)} characters is over the limit of {LIMITS.id_chars}",
                "run_id")
    return run_id


def _refuse(message: str, parameter: str = "query") -> NoReturn:
    raise RequestValidationError([{"type": "value_error", "loc": ("path", parameter),
                                   "msg": message}])


# ``{query:path}``: a query's name may hold '/' (sent as %2F, which the server decodes before
# routing); the sub-resource after it still picks the route.
QUERY = "/api/v1/queries/{query:path}"
Limit = Query(100, ge=1, le=1000, description="Page size.")
Offset = Query(0, ge=0, le=1_000_000, description="Rows to skip (paging).")
Since = Query(None, description="Start of the range (inclusive), ISO-8601; without it the "
              "newest rows are returned.")
Until = Query(None, description="End of the range (exclusive), ISO-8601.")


def router(reads: Reads, slots: ReadSlots, read_auth: list[Any],
           Scope: Any) -> APIRouter:  # noqa: N803
    """Each handler checks its parameters here, on the event loop, and reads the history on a
    read slot's thread (``slots``: never the thread pool ingest and /metrics use)."""
    routes = APIRouter()

    def get(path: str, model: Any, summary: str) -> Callable[[Any], Any]:
        return routes.get(path, tags=["history"], response_model=model, summary=summary,
                          dependencies=read_auth, responses=errors(401, 404, 503))

    @get("/api/v1/queries", list[models.QuerySummary], "Every query with its latest run")
    async def queries(limit: int = Limit, offset: int = Offset,
                      tenant: str | None = Scope) -> Any:
        return await slots.run(tenant, lambda: [_dump(q) for q in reads.queries(limit, offset,
                                                                                 tenant)])

    @get(QUERY + "/runs", list[models.RunSummary], "The runs of one query")
    async def runs(query: str, limit: int = Limit, offset: int = Offset,
                   tenant: str | None = Scope) -> Any:
        name = _query(query)
        return await slots.run(tenant, lambda: [_dump(r) for r in reads.runs(name, limit, offset,
                                                                              tenant)])

    @get(QUERY + "/runs/{run_id}/exception", models.RunException,
         "The whole exception of one run of a query")
    async def run_exception(query: str, run_id: str, tenant: str | None = Scope) -> Any:
        name, run_id = _query(query), _run_id(run_id)
        return await slots.run(tenant, lambda: reads.exception(name, run_id, tenant))

    @get(QUERY + "/state", list[models.StatePoint],
         "State operators of one query over time")
    async def state(query: str, operator: int | None = Query(None, ge=0, le=10_000),
                    since: datetime | None = Since, until: datetime | None = Until,
                    limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        name, (start, end) = _query(query), _range(since, until)
        return await slots.run(tenant, lambda: [
            _dump(p) for p in reads.state(name, operator, start, end, limit, offset, tenant)])

    @get(QUERY + "/progress", list[models.ProgressPoint],
         "Per-batch progress of one query over time")
    async def progress(query: str, since: datetime | None = Since,
                       until: datetime | None = Until, limit: int = Limit,
                       offset: int = Offset, tenant: str | None = Scope) -> Any:
        name, (start, end) = _query(query), _range(since, until)
        return await slots.run(tenant, lambda: reads.progress(name, start, end, limit, offset,
                                                              tenant))

    @get(QUERY + "/rollups", list[models.Rollup],
         "Per-minute, per-hour or per-day aggregates of a query, or of one of its operators")
    async def rollups(query: str, resolution: Literal["minute", "hour", "day"] = "minute",
                      operator: int | None = Query(None, ge=0, le=10_000),
                      since: datetime | None = Since, until: datetime | None = Until,
                      limit: int = Limit, offset: int = Offset,
                      tenant: str | None = Scope) -> Any:
        name, (start, end) = _query(query), _range(since, until)
        return await slots.run(tenant, lambda: reads.rollups(name, resolution, operator, start,
                                                             end, limit, offset, tenant))

    @get(QUERY + "/plans", list[models.QueryPlan],
         "Operator identity of each run of one query (from its executed plan), latest first")
    async def plans(query: str, limit: int = Limit, offset: int = Offset,
                    tenant: str | None = Scope) -> Any:
        name = _query(query)
        return await slots.run(tenant, lambda: reads.plans(name, limit, offset, tenant))

    @get("/api/v1/stalls", list[models.Stall], "Stall marks, newest first")
    async def stalls(open: bool = Query(False, description="only stalls not yet cleared"),
                     limit: int = Limit, offset: int = Offset,
                     tenant: str | None = Scope) -> Any:
        return await slots.run(tenant, lambda: reads.stalls(open, limit, offset, tenant))

    return routes


def _dump(view: Any) -> dict[str, Any]:
    return {name: getattr(view, name) for name in view.__dataclass_fields__}
