"""HEAD for every GET on the driver's port: a HEAD request is served as its GET, body dropped.

RFC 9110 asks a resource that answers GET to answer HEAD too (its status and headers), and load
balancers and uptime checks probe with it: prometheus_client's WSGI app allows only GET and
OPTIONS, so ``HEAD /metrics`` was 405 while ``HEAD /`` (the console) was 200. The WSGI twin of
the collector's ASGI middleware (``collector/head.py``): one wrapper in front of the whole
port, so no path can be left without it; a path that takes no GET answers HEAD with GET's 405.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def head_as_get(app: WsgiApp) -> WsgiApp:
    """``app`` with HEAD run as GET and no body sent. The answer's ``Content-Length`` is GET's
    (counted when the app set none); an ``Allow`` that names GET names HEAD too."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "HEAD":
            def allowing_head(status: str, headers: list[tuple[str, str]],
                              exc_info: Any = None) -> Any:
                return start_response(status, _with_head_allowed(headers), exc_info)

            return app(environ, allowing_head)

        answer: list[Any] = []

        def held(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status, list(headers), exc_info]
            return _drop  # the legacy write(): its bytes are a body, and HEAD sends none

        result = app({**environ, "REQUEST_METHOD": "GET"}, held)
        try:
            length = sum(len(chunk) for chunk in result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers, exc_info = answer
        headers = _with_head_allowed(headers)
        if not any(name.lower() == "content-length" for name, _ in headers):
            headers.append(("Content-Length", str(length)))
        start_response(status, headers, exc_info)
        return [b""]

    return wrapped


def _drop(_data: bytes) -> None:
    """A body write for a HEAD request: nothing is sent."""


def _with_head_allowed(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out = []
    for name, value in headers:
        if name.lower() == "allow":
            methods = [m.strip() for m in value.split(",")]
            if "GET" in methods and "HEAD" not in methods:
                value = ",".join([*methods, "HEAD"])
        out.append((name, value))
    return out
