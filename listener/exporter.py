"""The in-driver HTTP endpoint: /metrics from an injected registry, and the browser console.

Our own small WSGI server (the standard library's, one thread per request, like
prometheus_client's ``start_http_server``) so that one port serves both: /metrics through
prometheus_client's WSGI app, the console's pages through :mod:`sparkwatch.console.wsgi`.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import threading
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from sparkwatch.console.app import Console
from sparkwatch.console.wsgi import console_app


class ExporterError(RuntimeError):
    """The /metrics endpoint could not be started; the message says why and what to change."""


@dataclass
class MetricsServer:
    server: Any
    thread: Any
    address: str

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def stop(self, timeout: float = 1.0) -> None:
        """Stop serving; the serving thread closes the port and ends at once, not at a next
        poll (detach() has no time left by the time it gets here). Waits up to ``timeout``."""
        self.server.stop_serving()
        self.thread.join(timeout)


class _Server(ThreadingMixIn, WSGIServer):
    # Fire-and-forget request threads: none is gathered (or waited for) at close.
    daemon_threads = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stopping = threading.Event()
        # A byte on this pair wakes the loop from its select: no poll interval to wait out at
        # the stop (serve_forever's 0.5 s made detach() overrun its deadline), no idle wake-ups.
        # Made before the bind, whose failure calls server_close().
        self._wake, self._waker = socket.socketpair()
        super().__init__(*args, **kwargs)

    def serve_until_stopped(self) -> None:
        """serve_forever() without its poll; closes the server at the end (on this thread: the
        sockets it selects on are never closed under it)."""
        with self, selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake, selectors.EVENT_READ)
            while not self._stopping.is_set():
                ready = {key.fileobj for key, _ in selector.select()}
                if self in ready and not self._stopping.is_set():
                    self._handle_request_noblock()  # type: ignore[attr-defined] # not in typeshed
                self.service_actions()

    def shutdown(self) -> None:
        """The base's shutdown() waits for serve_forever(), which never runs here."""
        self.stop_serving()

    def stop_serving(self) -> None:
        self._stopping.set()
        with contextlib.suppress(OSError):  # already closed: stopped before
            self._waker.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake.close()
        self._waker.close()


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """A scrape every few seconds is not news: nothing is written to stderr."""


def serve_metrics(registry: CollectorRegistry, address: str, port: int,
                  console: Console | None = None) -> MetricsServer:
    app = make_wsgi_app(registry)
    if console is not None:
        app = console_app(console, app)
    try:
        family, host = _best_family(address, port)
        server_class = type("Server", (_Server,), {"address_family": family})
        server: WSGIServer = make_server(host, port, app, server_class, handler_class=_QuietHandler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ExporterError(
                f"metrics port {port} on {address} is already in use; choose another with "
                "SPARKWATCH_METRICS_PORT / spark.sparkwatch.metrics.port / metrics_port= "
                "(0 picks a free port)"
            ) from None
        raise ExporterError(f"cannot serve /metrics on {address}:{port}: {exc}") from None
    assert isinstance(server, _Server)
    thread = threading.Thread(target=server.serve_until_stopped, name="sparkwatch-http",
                              daemon=True)
    thread.start()
    return MetricsServer(server, thread, address)


def _best_family(address: str, port: int) -> tuple[socket.AddressFamily, str]:
    """IPv4 or IPv6 as the address says (an IPv6 address cannot bind an AF_INET socket)."""
    infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])
