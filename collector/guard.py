"""Slow clients cannot hold the server: a connection must deliver a request's headers within
``header_timeout`` seconds of opening (or of its request's first byte) or it is closed, and at
the connection cap a request whose headers did arrive takes the place of the oldest connection
still waiting for its own.

uvicorn closes idle keep-alive connections itself but waits for headers for ever: a silent or
trickling socket (slow-loris) would keep a connection slot and a file descriptor without limit.
At its ``limit_concurrency`` it answers every new request 503: a crowd of silent sockets kept
every push out until the deadline closed them, and again each time they reconnected. A push
sends its headers at once, so it is never the oldest waiting for them for long.
The body has its own deadline, in the ingest handler (:func:`.api._body`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger(__name__)


class HeaderDeadline(HttpToolsProtocol):  # type: ignore[misc]
    header_timeout: float = 10.0
    on_slow: Any = staticmethod(lambda: None)
    """called for each connection closed for slow headers (the collector counts them)"""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._deadline: asyncio.TimerHandle | None = None
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # the next request of a kept-alive connection
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        self._make_room()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._armed_at = self.loop.time()
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)

    def _make_room(self) -> None:
        """At the cap (uvicorn's check, which counts this connection too), close the connections
        that have waited longest for their headers until this request fits; when none waits,
        uvicorn answers 503 as before. Each is counted out at once: its close completes on the
        loop's next turn, after uvicorn's check."""
        limit = self.limit_concurrency
        if limit is None:
            return
        while len(self.connections) >= limit:
            waiting = [c for c in self.connections
                       if isinstance(c, HeaderDeadline) and c is not self and c._deadline]
            if not waiting:
                return
            oldest = min(waiting, key=lambda c: c._armed_at)
            oldest._disarm()
            self.connections.discard(oldest)
            oldest.on_slow()  # a slow client closed, as at its deadline
            log.info("closed a connection from %s to make room: no request headers after %.1f s",
                     _peer(oldest.client), self.loop.time() - oldest._armed_at)
            oldest.transport.close()

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.on_slow()
            log.info("closed a connection from %s: no request headers within %.0f s",
                     _peer(self.client), self.header_timeout)
            self.transport.close()


def _peer(client: Any) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"


def header_deadline(seconds: float, on_slow: Any) -> type[HeaderDeadline]:
    """The protocol class for uvicorn's ``http=``, with this deadline and slow-client callback."""
    return type("HeaderDeadline", (HeaderDeadline,),
                {"header_timeout": seconds, "on_slow": staticmethod(on_slow)})
