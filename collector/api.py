"""The HTTP API (FastAPI): ingest, /metrics, health, and the history read API.

OpenAPI is served at /openapi.json (docs at /docs). One router per concern
(:mod:`.routes.ingest`, :mod:`.routes.operations`, :mod:`.routes.reads`); handlers are thin:
the work is in :mod:`.ingest`, :mod:`.reads` and the metric exposition.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from sparkwatch.collector.auth import AuthError
from sparkwatch.collector.head import HeadAsGet
from sparkwatch.collector.reads import RETRY_AFTER_SECONDS, ReadsBusy, Withheld
from sparkwatch.collector.request_context import RequestContext
from sparkwatch.collector.routes import apidocs, console, ingest, operations, reads
from sparkwatch.collector.routes.common import error, read_auth, read_scope, scrape_auth
from sparkwatch.collector.routes.ingest import INGEST_PATH
from sparkwatch.collector.service import Service
from sparkwatch.history.engine import NoFreeConnection, ReadTimedOut
from sparkwatch.history.errors import HistoryError, UnknownOperator, UnknownQuery, UnknownRun
from sparkwatch.version import __version__

__all__ = ["INGEST_PATH", "create_app"]


def create_app(service: Service) -> FastAPI:
    pages = console.make_console(service)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        service.start()
        try:
            yield
        finally:
            service.stop()
            if pages.history is not None:
                pages.history.close()

    app = FastAPI(  # (wrapped in RequestContext below: request ids and security headers)
        title="sparkwatch collector", version=__version__, lifespan=lifespan,
        docs_url=None, redoc_url=None,  # /docs is served below, without a CDN
        description="Receives Spark Structured Streaming events pushed by sparkwatch listeners; "
        "serves /metrics for every app and the SQL history.",
    )

    withheld = Withheld()

    @app.exception_handler(HistoryError)
    async def history_error(_: Request, exc: HistoryError) -> JSONResponse:
        if isinstance(exc, UnknownQuery):
            return error(404, exc.message)
        if isinstance(exc, UnknownOperator | UnknownRun):
            return error(404, str(exc))
        # A tenant's reader must not learn where the history lives: the detail goes to the log.
        busy = isinstance(exc, ReadTimedOut | NoFreeConnection)
        return error(503, withheld.answer(exc), RETRY_AFTER_SECONDS if busy else None)

    @app.exception_handler(ReadsBusy)
    async def reads_busy(_: Request, exc: ReadsBusy) -> JSONResponse:
        return error(503, str(exc), RETRY_AFTER_SECONDS)

    @app.exception_handler(AuthError)
    async def auth_error(_: Request, exc: AuthError) -> JSONResponse:
        return error(401, str(exc))

    app.add_middleware(RequestContext)
    app.add_middleware(HeadAsGet)  # outermost: every route, the console's included
    app.include_router(ingest.router(service))
    app.include_router(operations.router(service, scrape_auth(service), read_auth(service),
                                         read_scope(service)))
    if service.reads is not None:
        app.include_router(reads.router(service.reads, service.read_slots, read_auth(service),
                                        read_scope(service)))
    # The browser console: HTML pages behind a read token (collector/routes/console.py).
    app.include_router(console.router(service, pages))
    app.include_router(apidocs.router(app.title))
    return app
