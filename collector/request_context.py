"""Per-request context: a request id in every response, log line and error body, and the
security headers every response carries (more on HTML pages, ``Cache-Control: no-store`` on the
API's and on every authenticated one).

A pure ASGI middleware (no per-request task or body buffering, so /metrics streams as before).
The id comes from the client's ``X-Request-Id`` when it is short and plain, else it is made here.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import Any

import orjson

from sparkwatch.logs import format_root_handlers

REQUEST_ID: ContextVar[str | None] = ContextVar("sparkwatch_request_id", default=None)
HEADER = b"x-request-id"
_SANE = re.compile(rb"[A-Za-z0-9._:-]{1,64}")

BASE_HEADERS = ((b"x-content-type-options", b"nosniff"),)
# HTML that brings no policy of its own (the docs page and the console's pages do) may load
# nothing and be framed by nothing.
HTML_HEADERS = (
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
)


NO_STORE = (b"cache-control", b"no-store")
"""On every answer under /api/ and to every request with credentials (unless the route set its
own): a tenant's history, read with its token, must not stay in a browser's or a proxy's cache."""


def _private(scope: dict[str, Any]) -> bool:
    return scope.get("path", "").startswith("/api/") or any(
        name == b"authorization" for name, _ in scope.get("headers", ()))


def _credentials_given(scope: dict[str, Any]) -> int:
    return sum(name == b"authorization" for name, _ in scope.get("headers", ()))


log = logging.getLogger(__name__)
INTERNAL_ERROR = "internal error: the collector's log has its detail under this request id"


async def _json_error(send: Any, status: int, detail: str, request_id: str) -> None:
    body = orjson.dumps({"detail": detail, "request_id": request_id})
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (HEADER, request_id.encode()), *BASE_HEADERS, NO_STORE]})
    await send({"type": "http.response.body", "body": body})


async def _refuse_two_credentials(request_id: str, send: Any) -> None:
    """400 to a request with more than one Authorization header: the collector read the first, a
    proxy in front of it may check the last, and the two would disagree about who is calling."""
    await _json_error(send, 400, "more than one Authorization header: send one", request_id)


def current_request_id() -> str | None:
    return REQUEST_ID.get()


def _request_id(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", ()):
        if name == HEADER and _SANE.fullmatch(value):
            return value.decode()
    return uuid.uuid4().hex


class RequestContext:
    """ASGI middleware: sets :data:`REQUEST_ID` for the request's code (threads included: the
    thread pool copies the context) and adds the id and security headers to the response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        if _credentials_given(scope) > 1:
            await _refuse_two_credentials(request_id, send)
            return
        token = REQUEST_ID.set(request_id)
        private = _private(scope)
        started = False

        async def send_with_headers(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", ()))
                headers += [(HEADER, request_id.encode()), *BASE_HEADERS]
                if private and not any(k == NO_STORE[0] for k, _ in headers):
                    headers.append(NO_STORE)
                # The console's pages and the docs page bring their own policy: a header the
                # page set stays, the rest are added.
                if any(k == b"content-type" and v.startswith(b"text/html") for k, v in headers):
                    present = {k for k, _ in headers}
                    headers += [h for h in HTML_HEADERS if h[0] not in present]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # What no handler caught: Starlette's ServerErrorMiddleware, outside this one, would
            # answer a bare text 500 without the id or the headers. Logged here, under the id.
            if started:  # a response under way (a stream) cannot be replaced: cut it short
                raise
            log.exception("unhandled error answering %s %s", scope.get("method"),
                          scope.get("path"))
            await _json_error(send, 500, INTERNAL_ERROR, request_id)
        finally:
            REQUEST_ID.reset(token)


class RequestIdFilter(logging.Filter):
    """Gives every log record a ``request_id`` ("-" outside a request) for the log format."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get() or "-"
        return True


def log_with_request_ids(fmt: str) -> None:
    """Every handler of the root logger writes the request id of the record's request."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(RequestIdFilter())
    format_root_handlers(fmt.replace("%(name)s:", "%(name)s [%(request_id)s]:"))
