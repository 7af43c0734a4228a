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
        path = _path(environ)
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


def _path(environ: dict[str, Any]) -> str:
    """PATH_INFO as the characters the client meant: WSGI gives its bytes decoded as Latin-1
    (PEP 3333), a percent-encoded UTF-8 name like caf%C3%A9 as 'cafÃ©'. Bytes that are not
    UTF-8 become lone surrogates, which the query key check answers with a 400."""
    raw = environ.get("PATH_INFO") or "/"
    try:
        return raw.encode("latin-1").decode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a server that decoded it already
        return raw
