"""/metrics, /healthz and /readyz."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.core import Metric
from prometheus_client.exposition import gzip_accepted

from sparkwatch.collector import models
from sparkwatch.collector.routes.common import errors
from sparkwatch.collector.service import Service
from sparkwatch.metrics.text import gzipped, render

FULL_FRACTION = 0.9
"""The spool this full makes /readyz answer 503 (a load balancer sends pushes elsewhere)."""


def router(service: Service, scrape_auth: list[Any], read_auth: list[Any],
           read_scope: Any) -> APIRouter:
    routes = APIRouter()

    @routes.get("/metrics", tags=["operations"], dependencies=scrape_auth,
             response_class=Response, responses={
                 200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                       "description": "Prometheus text exposition"}, **errors(401)})
    def metrics(request: Request) -> Response:
        return _exposition(request, list(service.registry.collect()), report_dropped=True)

    @routes.get("/api/v1/metrics", tags=["reads"], dependencies=read_auth,
                response_class=Response, responses={
                    200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                          "description": "Prometheus text exposition of the caller's queries"},
                    **errors(401)})
    def queries_metrics(request: Request, tenant: str | None = read_scope) -> Response:
        """The series of the caller's queries, as /metrics has them: a tenant's read token reads
        its tenant's (it never opens /metrics, which holds every tenant's), the admin read token
        every tenant's. Without the collector's own metrics. What `sparkwatch top --collector`
        reads."""
        return _exposition(request, service.queries_exposition(tenant))

    # The probes answer on the event loop (state in memory, no I/O): never behind a thread pool
    # a burst of ingest could take. /metrics collects on a pool thread: thousands of queries
    # take CPU time the event loop must not wait on; reads never take those threads.
    @routes.get("/healthz", tags=["operations"], response_model=models.Health)
    async def healthz() -> models.Health:
        """The process serves requests."""
        return models.Health(status="ok")

    @routes.get("/readyz", tags=["operations"], response_model=models.Ready,
             responses={503: {"model": models.Ready}})
    async def readyz() -> Any:
        """Ready to accept events; reports a degraded history store (ingest still works)."""
        ready = _readiness(service)
        refusing = ready.status in ("full", "spool_unwritable")
        return JSONResponse(ready.model_dump(), status_code=503 if refusing else 200)

    return routes


def _exposition(request: Request, families: list[Metric], report_dropped: bool = False
                ) -> Response:
    """``families``, collected now (the snapshot, and any error, before the answer starts),
    rendered and sent in pieces: thousands of queries make a body of tens of MB, never held
    whole. Prometheus asks for gzip."""
    chunks = render(families, report_dropped=report_dropped)
    if gzip_accepted(request.headers.get("accept-encoding", "")):
        return StreamingResponse(gzipped(chunks), media_type=CONTENT_TYPE_LATEST,
                                 headers={"Content-Encoding": "gzip"})
    return StreamingResponse(chunks, media_type=CONTENT_TYPE_LATEST)


HISTORY_FAILING = "history writes fail (events stay spooled); the collector's log says why"


def _readiness(service: Service) -> models.Ready:
    pump, spool = service.pump, service.spool
    # Served without a token: what fails, never where (the database's host and name, the
    # spool's directory); the collector's log has the detail.
    failing = pump is not None and pump.last_error is not None
    history = models.HistoryHealth(enabled=pump is not None, ok=pump is None or pump.healthy,
                                   error=HISTORY_FAILING if failing else None)
    workers = [models.WorkerHealth(name=h.name, state=h.state, deadline_seconds=h.deadline_seconds,
                                   seconds_since_progress=round(h.seconds_since_progress, 3))
               for h in (w.health() for w in service.workers())]
    healthy = history.ok and all(w.state in ("ok", "stopped") for w in workers)
    status: Literal["ready", "degraded", "full", "spool_unwritable"] = (
        "ready" if healthy else "degraded")
    spool_health = None
    if spool is not None:
        error = spool.append_error
        spool_health = models.SpoolHealth(
            pending_bytes=spool.pending_bytes, max_bytes=spool.max_bytes,
            writable=error is None,
            error=None if error is None else f"the spool cannot write: {spool.append_reason}")
        if spool.pending_bytes >= spool.max_bytes * FULL_FRACTION:
            status = "full"
        if error is not None:  # the disk, not the bound, refuses: every push gets 503
            status = "spool_unwritable"
    return models.Ready(status=status, history=history, spool=spool_health, workers=workers)
