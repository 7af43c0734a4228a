"""The in-driver HTTP endpoint: /metrics from an injected registry, and the browser console.

Our own small WSGI server (the standard library's, one thread per request, like
prometheus_client's ``start_http_server``) so that one port serves both: /metrics through
prometheus_client's WSGI app, the console's pages through :mod:`sparkwatch.console.wsgi`.
"""

from __future__ import annotations

import errno
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

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Server(ThreadingMixIn, WSGIServer):
    # Fire-and-forget request threads: none is gathered (or waited for) at close.
    daemon_threads = True


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
    thread = threading.Thread(target=server.serve_forever, name="sparkwatch-http", daemon=True)
    thread.start()
    return MetricsServer(server, thread, address)


def _best_family(address: str, port: int) -> tuple[socket.AddressFamily, str]:
    """IPv4 or IPv6 as the address says (an IPv6 address cannot bind an AF_INET socket)."""
    infos = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])
