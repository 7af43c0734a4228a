"""The console as a WSGI application in front of another (the driver's /metrics): standard
library only, so it runs in any Spark driver."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from sparkwatch.console.app import SECURITY_HEADERS, Console, is_console_path

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           503: "Service Unavailable"}


def console_app(console: Console, rest: WsgiApp) -> WsgiApp:
    """Console paths answered by ``console`` (GET and HEAD only: no page writes anything);
    every other path, /metrics included, by ``rest``."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if not is_console_path(path):
            return rest(environ, start_response)
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed",
                           [("Allow", "GET, HEAD"), ("Content-Length", "0"), *SECURITY_HEADERS])
            return [b""]
        params = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        response = console.handle(path, params, None)
        headers = [("Content-Type", response.content_type),
                   ("Content-Length", str(len(response.body))), *response.headers]
        start_response(f"{response.status} {REASONS.get(response.status, '')}", headers)
        return [b"" if method == "HEAD" else response.body]

    return app
