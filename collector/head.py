"""HEAD for every GET: a HEAD request is served as its GET, and the answer's body dropped.

RFC 9110 asks a resource that answers GET to answer HEAD too (its status and headers), and load
balancers and uptime checks probe with it: /healthz, /readyz, /metrics and the read API answered
405. One middleware serves them all, so no route can be left without it; a route that takes no
GET (ingest) answers HEAD with GET's 405."""

from __future__ import annotations

from typing import Any


class HeadAsGet:
    """ASGI middleware: HEAD runs the GET handler (auth, limits and all) and sends no body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def without_body(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}  # more_body kept: the stream ends as sent
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)
