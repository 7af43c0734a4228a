"""The HTTP API (FastAPI): ingest, /metrics, health, and the history read API.

OpenAPI is served at /openapi.json (docs at /docs). Handlers are thin: the work is in
:mod:`.ingest`, :mod:`.reads` and the metric exposition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.exposition import gzip_accepted

from sparkwatch.collector import models
from sparkwatch.collector.auth import AuthError, Caller
from sparkwatch.collector.body import (
    BodyError,
    decompress,
    events_of,
    inflated_size,
    too_large,
)
from sparkwatch.collector.inflight import Busy
from sparkwatch.collector.rates import RateLimited
from sparkwatch.collector.reads import Reads
from sparkwatch.collector.request_context import RequestContext, current_request_id
from sparkwatch.collector.service import Service
from sparkwatch.history.errors import HistoryError, UnknownOperator, UnknownQuery
from sparkwatch.metrics.text import gzipped, render
from sparkwatch.spool import SpoolUnavailable
from sparkwatch.version import __version__

log = logging.getLogger(__name__)
INGEST_PATH = "/api/v1/events"
bearer = HTTPBearer(auto_error=False, description="Ingest token (per app) or read token.")
# Declares the bearer scheme in OpenAPI; the handlers check the header themselves (exact errors).
BEARER = Security(bearer)
SPOOL_FULL_RETRY_SECONDS = 10
FULL_FRACTION = 0.9


def _error(status: int, message: str) -> JSONResponse:
    """An error answer: what was wrong, in one line, and the request's id (also in the logs)."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if status == 408:
        headers["Connection"] = "close"  # the rest of a trickled body is not waited for
    return JSONResponse({"detail": message, "request_id": current_request_id()},
                        status_code=status, headers=headers)


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": models.Error} for code in codes}


def create_app(service: Service) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            yield
        finally:
            service.stop()

    app = FastAPI(  # (wrapped in RequestContext below: request ids and security headers)
        title="sparkwatch collector", version=__version__, lifespan=lifespan,
        description="Receives Spark Structured Streaming events pushed by sparkwatch listeners; "
        "serves /metrics for every app and the SQL history.",
    )
    read_auth = _read_auth(service)
    scrape_auth = _scrape_auth(service)

    @app.exception_handler(HistoryError)
    async def history_error(_: Request, exc: HistoryError) -> JSONResponse:
        status = 404 if isinstance(exc, UnknownQuery | UnknownOperator) else 503
        return _error(status, str(exc))

    @app.exception_handler(AuthError)
    async def auth_error(_: Request, exc: AuthError) -> JSONResponse:
        return _error(401, str(exc))

    app.add_middleware(RequestContext)
    _add_ingest(app, service)
    _add_operations(app, service, scrape_auth)
    if service.reads is not None:
        _add_reads(app, service.reads, read_auth, _read_scope(service))
    return app


def _read_auth(service: Service) -> list[Any]:
    """The dependency guarding reads: only declared (in OpenAPI too) when a read token is set."""
    if not service.auth.reads_protected:
        return []

    def check(request: Request, _: Any = BEARER) -> None:
        service.auth.check_read(request.headers.get("authorization"))

    return [Depends(check)]


def _scrape_auth(service: Service) -> list[Any]:
    """/metrics: the scrape token or the admin read token, when either is set."""
    if not service.auth.scrape_protected:
        return []

    def check(request: Request, _: Any = BEARER) -> None:
        service.auth.check_scrape(request.headers.get("authorization"))

    return [Depends(check)]


def _read_scope(service: Service) -> Any:
    """The tenant a read answers for (None: every tenant), from the caller's read token."""

    def scope(request: Request) -> str | None:
        return service.auth.read_scope(request.headers.get("authorization"))

    return Depends(scope)


async def _body(request: Request, limit: int, timeout: float) -> bytearray:
    """The raw body, refused as soon as it passes ``limit`` (never buffered beyond it) or when
    it has not arrived whole within ``timeout`` seconds (a trickling client).

    Read into one buffer, of the declared size when there is one: chunks joined at the end, or
    a buffer grown as they come, would hold the body about twice at a moment."""
    declared = request.headers.get("content-length")
    size = int(declared) if declared and declared.isdigit() else 0
    if size > limit:
        raise too_large(limit)
    body, filled = bytearray(size), 0
    try:
        async with asyncio.timeout(timeout):  # one deadline for the whole body, no task a chunk
            async for chunk in request.stream():
                end = filled + len(chunk)
                if end > limit:
                    raise too_large(limit)
                body[filled:end] = chunk  # in place within the declared size, else it grows
                filled = end
    except TimeoutError:
        raise BodyError(408, f"request body not received within {timeout:g} s "
                        "(body_timeout_seconds)") from None
    del body[filled:]
    return body


def _check_content_type(request: Request) -> None:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        shown = media_type[:60] or "none"
        raise BodyError(415, f"Content-Type must be application/json (got {shown})")


def _add_ingest(app: FastAPI, service: Service) -> None:
    settings = service.settings

    @app.post(
        INGEST_PATH, tags=["ingest"], response_model=models.IngestResult,
        summary="Push a batch of listener events (JSON, optionally Content-Encoding: gzip)",
        description="Valid events are accepted even when others in the request are not; the "
        "response lists the refused ones with the reason. 200 once the accepted events are "
        "durable in the collector's spool. 429 when every event was refused by a cardinality "
        "limit; 503 (Retry-After) when the spool is full or its disk refuses the write: nothing "
        "was accepted, send again.",
        responses={**_errors(400, 401, 408, 413, 415, 429, 503)},
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": models.INGEST_BODY_SCHEMA}}}},
    )
    async def ingest(request: Request, _: Any = BEARER) -> Any:
        try:
            response = await _ingest(service, settings.max_body_bytes, request)
        except RateLimited as exc:  # nothing was accepted: the push sink sends it again later
            response = _error(429, str(exc))
            response.headers["Retry-After"] = str(exc.retry_after)
        service.metrics.requests.labels(str(response.status_code)).inc()
        return response


async def _ingest(service: Service, limit: int, request: Request) -> JSONResponse:
    try:
        caller = service.auth.ingest_caller(request.headers.get("authorization"))
        _check_content_type(request)
        encoding = request.headers.get("content-encoding")
        async with service.inflight.reserve(_declared(request, limit)) as held:
            # In a list the worker empties: no reference here keeps the body alive meanwhile.
            body = [await _body(request, limit, service.settings.body_timeout_seconds)]
            _take_bytes(service, caller.tenant, len(body[0]))
            await held.resize(inflated_size(body[0], encoding, limit))
            # Decoding a large batch is CPU work: off the event loop, which keeps serving
            # /metrics.
            outcome = await run_in_threadpool(
                _decode_and_ingest, service, body, encoding, limit, caller)
    except AuthError as exc:
        log.info("ingest refused (401) from %s: %s", _client(request), exc)
        return _error(401, str(exc))
    except BodyError as exc:
        if exc.status == 408:
            service.metrics.slow_clients.labels("body").inc()
        return _error(exc.status, str(exc))
    except (SpoolUnavailable, Busy) as exc:  # nothing was accepted
        response = _error(503, f"not accepted, send again later: {exc}")
        response.headers["Retry-After"] = str(SPOOL_FULL_RETRY_SECONDS)
        return response
    result = models.IngestResult(
        accepted=outcome.accepted, duplicates=outcome.duplicates,
        rejected=[models.Rejected(index=r.index, reason=r.reason, error=r.error)  # type: ignore[arg-type]
                  for r in outcome.rejected],
    )
    if outcome.only_limits:
        return JSONResponse({"detail": outcome.rejected[0].error,
                             "request_id": current_request_id(), **result.model_dump()},
                            status_code=429)
    return JSONResponse(result.model_dump())


def _take_bytes(service: Service, tenant: str, size: int) -> None:
    """The tenant's bytes-per-second quota, taken before the body is decoded (the CPU it costs
    is what the quota protects); raises :class:`RateLimited`."""
    try:
        service.byte_rates.take(tenant, size)
    except RateLimited:
        service.metrics.quota_rejected(tenant, service.byte_rates.quota)  # one request
        raise


def _client(request: Request) -> str:
    return request.client.host if request.client else "?"


def _declared(request: Request, limit: int) -> int:
    """The body's size as declared, before it is read (the limit when it is not declared)."""
    declared = request.headers.get("content-length")
    return min(int(declared), limit) if declared and declared.isdigit() else limit


def _decode_and_ingest(
    service: Service, body: list[bytearray], encoding: str | None, limit: int, caller: Caller
) -> Any:
    raw = decompress(body.pop(), encoding, limit)  # the body is freed once inflated
    items, strict = events_of(raw, service.settings.max_events_per_request)
    # A strictly read body is kept for the contract's canonical check (bodies over the lean
    # decode size are never strict, so this holds at most a few MiB); any other is freed now.
    strict_body = raw if strict else None
    del raw
    return service.ingestor.ingest(items, caller, strict_body=strict_body)


def _add_operations(app: FastAPI, service: Service, read_auth: list[Any]) -> None:
    @app.get("/metrics", tags=["operations"], dependencies=read_auth,
             response_class=Response, responses={
                 200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                       "description": "Prometheus text exposition"}, **_errors(401)})
    def metrics(request: Request) -> Response:
        # Collected now (the snapshot, and any error, before the answer starts), then rendered
        # and sent in pieces: thousands of queries make a body of tens of MB, never held whole.
        # Prometheus asks for gzip.
        chunks = render(list(service.registry.collect()), report_dropped=True)
        if gzip_accepted(request.headers.get("accept-encoding", "")):
            return StreamingResponse(gzipped(chunks), media_type=CONTENT_TYPE_LATEST,
                                     headers={"Content-Encoding": "gzip"})
        return StreamingResponse(chunks, media_type=CONTENT_TYPE_LATEST)

    @app.get("/healthz", tags=["operations"], response_model=models.Health)
    def healthz() -> models.Health:
        """The process serves requests."""
        return models.Health(status="ok")

    @app.get("/readyz", tags=["operations"], response_model=models.Ready,
             responses={503: {"model": models.Ready}})
    def readyz() -> Any:
        """Ready to accept events; reports a degraded history store (ingest still works)."""
        ready = _readiness(service)
        return JSONResponse(ready.model_dump(), status_code=503 if ready.status == "full" else 200)


def _readiness(service: Service) -> models.Ready:
    pump, spool = service.pump, service.spool
    history = models.HistoryHealth(enabled=pump is not None, ok=pump is None or pump.healthy,
                                   error=pump.last_error if pump is not None else None)
    workers = [models.WorkerHealth(name=h.name, state=h.state, deadline_seconds=h.deadline_seconds,
                                   seconds_since_progress=round(h.seconds_since_progress, 3))
               for h in (w.health() for w in service.workers())]
    healthy = history.ok and all(w.state in ("ok", "stopped") for w in workers)
    status: Literal["ready", "degraded", "full"] = "ready" if healthy else "degraded"
    spool_health = None
    if spool is not None:
        spool_health = models.SpoolHealth(pending_bytes=spool.pending_bytes,
                                          max_bytes=spool.max_bytes)
        if spool.pending_bytes >= spool.max_bytes * FULL_FRACTION:
            status = "full"
    return models.Ready(status=status, history=history, spool=spool_health, workers=workers)


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


def _add_reads(app: FastAPI, reads: Reads, read_auth: list[Any], Scope: Any) -> None:  # noqa: N803
    def get(path: str, model: Any, summary: str) -> Callable[[Any], Any]:
        return app.get(path, tags=["history"], response_model=model, summary=summary,
                       dependencies=read_auth, responses=_errors(401, 404, 503))

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

    @get("/api/v1/stalls", list[models.Stall], "Stall marks, newest first")
    def stalls(open: bool = Query(False, description="only stalls not yet cleared"),
               limit: int = Limit, offset: int = Offset, tenant: str | None = Scope) -> Any:
        return reads.stalls(open, limit, offset, tenant)


def _dump(view: Any) -> dict[str, Any]:
    return {name: getattr(view, name) for name in view.__dataclass_fields__}
