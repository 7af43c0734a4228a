"""POST /api/v1/events: a batch of listener events in, acknowledged once durable in the spool."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

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
from sparkwatch.collector.ingest import canonical_event
from sparkwatch.collector.rates import RateLimited
from sparkwatch.collector.request_context import current_request_id
from sparkwatch.collector.routes.common import BEARER, error, errors
from sparkwatch.collector.service import Service
from sparkwatch.collector.tenants import Contested
from sparkwatch.collector.typedwire import typed_body
from sparkwatch.spool import ShareFull, SpoolFull, SpoolUnavailable, SpoolWriteFailed

log = logging.getLogger(__name__)
INGEST_PATH = "/api/v1/events"
SPOOL_FULL_RETRY_SECONDS = 10


def router(service: Service) -> APIRouter:
    settings, routes = service.settings, APIRouter()

    @routes.post(
        INGEST_PATH, tags=["ingest"], response_model=models.IngestResult,
        summary="Push a batch of listener events (JSON, optionally Content-Encoding: gzip)",
        description="Valid events are accepted even when others in the request are not; the "
        "response lists the refused ones with the reason. 200 once the accepted events are "
        "durable in the collector's spool. 429 when every event was refused by a cardinality "
        "limit; 503 (Retry-After) when the spool is full or its disk refuses the write: nothing "
        "was accepted, send again.",
        responses={**errors(400, 401, 408, 413, 415, 429, 503)},
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": models.INGEST_BODY_SCHEMA}}}},
    )
    async def ingest(request: Request, _: Any = BEARER) -> Any:
        try:
            response = await _ingest(service, settings.max_body_bytes, request)
        except RateLimited as exc:  # nothing was accepted: the push sink sends it again later
            response = error(429, str(exc))
            response.headers["Retry-After"] = str(exc.retry_after)
        service.metrics.requests.labels(str(response.status_code)).inc()
        return response

    return routes


async def _ingest(service: Service, limit: int, request: Request) -> JSONResponse:
    try:
        caller = service.auth.ingest_caller(request.headers.get("authorization"))
        _check_content_type(request)
        encoding = request.headers.get("content-encoding")
        async with service.inflight.reserve(_declared(request, limit), caller.tenant) as held:
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
        return error(401, str(exc))
    except BodyError as exc:
        if exc.status == 408:
            service.metrics.slow_clients.labels("body").inc()
        return error(exc.status, str(exc))
    except SpoolUnavailable as exc:  # nothing was accepted
        _log_refusal(exc)
        return _unavailable(spool_refusal(exc))
    except (Busy, Contested) as exc:  # nothing was accepted
        return _unavailable(str(exc))
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


def _unavailable(why: str) -> JSONResponse:
    """503 with Retry-After: backpressure, the client sends the same request again later."""
    response = error(503, f"not accepted, send again later: {why}")
    response.headers["Retry-After"] = str(SPOOL_FULL_RETRY_SECONDS)
    return response


def spool_refusal(exc: SpoolUnavailable) -> str:
    """Why the spool refused a push, as its tenant may read it: what is full and the tenant's
    own numbers, never the spool's directory nor the bytes other tenants hold (any ingest
    token's holder reads it; the operator's log has the rest)."""
    if isinstance(exc, ShareFull):
        return (f"this tenant's share of the spool is full: its events not yet in the history "
                f"hold {exc.owned} bytes; {exc.more} more would exceed its share of {exc.bound} "
                "bytes (--spool-tenant-share of --spool-max-bytes)")
    if isinstance(exc, SpoolFull):
        held = "" if exc.owned is None else f"; this tenant's events hold {exc.owned} bytes of it"
        return (f"the spool is full: {exc.more} more bytes would exceed its bound of "
                f"{exc.bound} bytes (--spool-max-bytes){held}")
    if isinstance(exc, SpoolWriteFailed):
        return f"the spool's disk refuses the write ({exc.reason})"
    return "the spool cannot take events now"


_LOG_EVERY_SECONDS = 60.0
_logged: dict[type, float] = {}
"""When a refusal of each kind was last logged: under backpressure every client's retry is one."""


def _log_refusal(exc: SpoolUnavailable) -> None:
    """The refusal with the spool's directory, for the operator: once a minute per kind."""
    now, kind = time.monotonic(), type(exc)
    if now - _logged.get(kind, -_LOG_EVERY_SECONDS) >= _LOG_EVERY_SECONDS:
        _logged[kind] = now
        log.warning("ingest refused (503): %s (the same refusals for a minute are not logged)",
                    exc)


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
    # The common body (the push sink's progress events, canonical JSON) is read typed in one
    # pass; any other, or one the structs are unsure of, takes the exact way below.
    typed = typed_body(raw, service.settings.max_events_per_request, canonical_event)
    if typed is not None:
        del raw
        return service.ingestor.ingest_checked(typed, caller)
    items, strict = events_of(raw, service.settings.max_events_per_request)
    # A strictly read body is kept for the contract's canonical check (bodies over the lean
    # decode size are never strict, so this holds at most a few MiB); any other is freed now.
    strict_body = raw if strict else None
    del raw
    return service.ingestor.ingest(items, caller, strict_body=strict_body)


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
