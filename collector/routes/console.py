"""The browser console's pages (``/``, ``/queries/<id>``) in the collector: every app it
receives, or a tenant's only, behind a read token.

A browser cannot send a bearer token by itself, so the pages also take HTTP Basic credentials
whose password is the read token (the browser asks for it after the 401); the user name is not
looked at. Pages answer GET and HEAD only, from readers: none can write anything.
"""

from __future__ import annotations

import base64
import binascii

from fastapi import APIRouter, Request, Response

from sparkwatch.collector.auth import AuthError
from sparkwatch.collector.reads import RETRY_AFTER_SECONDS, ReadsBusy, read_bounds
from sparkwatch.collector.service import Service
from sparkwatch.console.app import SECURITY_HEADERS, Console
from sparkwatch.console.history import HistoryData
from sparkwatch.console.pages import error_page
from sparkwatch.metrics.state import MetricState

READ_METHODS = ["GET", "HEAD"]
"""As the driver's pages (docs/console.md): a HEAD answers the GET's status and headers, and the
server leaves the body out."""
CHALLENGE = 'Basic realm="sparkwatch console", charset="UTF-8"'


def make_console(service: Service) -> Console:
    url = service.settings.history_url if service.reads is not None else None
    # Bounded as the read API's reads (read_timeout_seconds).
    history = HistoryData(url, read_bounds(service.settings)) if url else None

    def states(tenant: str | None) -> list[MetricState]:
        return [state for name, state in service.tenants.items()
                if tenant is None or name == tenant]

    return Console(history, states, log_name="the collector's log")


def bearer_of(header: str | None) -> str | None:
    """``Authorization`` as a bearer header: Basic credentials become their password."""
    if not header or not header.lower().startswith("basic "):
        return header
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise AuthError("malformed Basic credentials") from None
    _, _, password = decoded.partition(":")
    return f"Bearer {password}" if password else None


def router(service: Service, console: Console) -> APIRouter:
    routes = APIRouter(include_in_schema=False)

    async def answer(request: Request, path: str, reads: bool = True) -> Response:
        """The page at ``path``; with ``reads`` (a page that may read the history) built on a
        read slot's thread (:class:`~sparkwatch.collector.reads.ReadSlots`), else here."""
        try:
            if not service.auth.reads_protected:
                raise AuthError("the console needs a read token: start the collector with "
                                "a read token (or tenant read tokens)")
            tenant = service.auth.read_scope(bearer_of(request.headers.get("authorization")))
        except AuthError as exc:
            return Response(error_page(401, str(exc)), 401, media_type="text/html",
                            headers={"WWW-Authenticate": CHALLENGE, **dict(SECURITY_HEADERS)})
        params = dict(request.query_params)
        if not reads:
            page = console.handle(path, params, tenant)
        else:
            try:
                page = await service.read_slots.run(
                    tenant, lambda: console.handle(path, params, tenant))
            except ReadsBusy as exc:
                return Response(error_page(503, str(exc)), 503, media_type="text/html",
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS),
                                         **dict(SECURITY_HEADERS)})
        # (nosniff is added to every answer by the request context middleware.)
        headers = {k: v for k, v in page.headers if k != "X-Content-Type-Options"}
        return Response(page.body, page.status, headers=headers,
                        media_type=page.content_type)

    @routes.api_route("/", methods=READ_METHODS)
    async def overview(request: Request) -> Response:
        return await answer(request, "/")

    @routes.api_route("/queries/{query:path}", methods=READ_METHODS)
    async def query_page(request: Request, query: str) -> Response:
        return await answer(request, "/queries/" + query)

    @routes.api_route("/console.css", methods=READ_METHODS)
    async def css(request: Request) -> Response:
        return await answer(request, "/console.css", reads=False)

    @routes.api_route("/console.js", methods=READ_METHODS)
    async def js(request: Request) -> Response:
        return await answer(request, "/console.js", reads=False)

    return routes
