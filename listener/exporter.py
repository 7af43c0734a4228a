"""The in-driver HTTP endpoint: /metrics from an injected registry, and the browser console.

Our own small WSGI server (the standard library's, one thread per request, like
prometheus_client's ``start_http_server``) so that one port serves both: /metrics through
prometheus_client's WSGI app, the console's pages through :mod:`sparkwatch.console.wsgi`.

It runs inside the monitored app, so a client cannot make it grow: a request must be read
within :data:`REQUEST_TIMEOUT_SECONDS` of its connection opening, at most
:data:`MAX_CONNECTIONS` connections are handled at once (one more takes the place of the oldest
still waiting for its request, or is answered 503 and closed on the spot, by no thread of its
own, when all are being answered), and stopping the server closes every connection it holds.
HEAD is answered on every path as GET is, without the body (:mod:`.head`).
"""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import selectors
import socket
import threading
import time
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from types import TracebackType
from typing import Any
from wsgiref.simple_server import ServerHandler, WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from sparkwatch.console.app import Console
from sparkwatch.console.wsgi import console_app
from sparkwatch.listener.head import head_as_get

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_SECONDS = 10.0
"""A request's line and headers must have arrived within this many seconds of its connection
opening, else the connection is closed (also the most one write of the answer may take). Without
it every silent client held a thread and a descriptor of the driver for ever (1,500 silent
connections made 1,511 threads); Prometheus sends its scrape at once, so 10 s (the collector's
header deadline) is never near a real client's."""

MAX_CONNECTIONS = 64
"""Connections handled at once, each on its own thread. One more takes the place of the oldest
connection whose request has not arrived yet (a silent or trickling client, closed to make room:
a scrape sends its request at once, so 64 silent clients cannot keep Prometheus out); when
every connection is being answered, it is answered 503 and closed at once. A driver is scraped
by one or two Prometheus servers and read by a few browsers: 64 is far more than those, and
bounds what a flood costs the app (64 threads and descriptors, not one per connection)."""

LISTEN_BACKLOG = 128
"""Connections the kernel holds ready for the accepting thread. The base's 5 let a burst of
connections (a flood the cap then answers 503) overflow it, and a scrape arriving in it had its
connection attempt dropped and retried a second later; queued connections cost the app nothing."""


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
        poll (detach() has no time left by the time it gets here), and every connection open is
        shut down at once (its client sees it closed). Waits up to ``timeout`` for the thread
        and for the connections' threads to have closed them."""
        deadline = time.monotonic() + timeout
        self.server.stop_serving()
        self.thread.join(timeout)
        self.server.wait_connections_closed(deadline - time.monotonic())


class _Server(ThreadingMixIn, WSGIServer):
    # Fire-and-forget request threads: none is gathered (or waited for) at close; stop_serving()
    # shuts their connections down instead, which ends them.
    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stopping = threading.Event()
        # The connections being handled. Shut down (stop_serving) and closed (shutdown_request)
        # only under the lock, so a stop never shuts a descriptor closed and reused meanwhile.
        self._open: set[socket.socket] = set()
        # Of those, the ones whose request has not been read yet, oldest first (a dict keeps
        # the order), and the ones shut down to make room whose threads have yet to close them.
        self._unread: dict[socket.socket, None] = {}
        self._evicted: set[socket.socket] = set()
        self._open_changed = threading.Condition()
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

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection while fewer than ``max_connections`` are handled, making
        room by closing the oldest one still waiting for its request; else a 503 from this
        thread, which never waits on the client."""
        with self._open_changed:
            admitted = not self._stopping.is_set() and self._room()
            if admitted:
                self._open.add(request)
                self._unread[request] = None
        if admitted:
            super().process_request(request, client_address)
        else:
            _refuse(request, self.max_connections)
            super().shutdown_request(request)

    def _room(self) -> bool:
        """Whether one more connection may be handled, once the oldest unread one is shut down
        if none may (under the lock). Its thread reads the end at once and closes it."""
        if len(self._open) - len(self._evicted) < self.max_connections:
            return True
        oldest = next(iter(self._unread), None)
        if oldest is None:  # every connection is being answered: none is made to wait
            return False
        del self._unread[oldest]
        self._evicted.add(oldest)
        with contextlib.suppress(OSError):  # the client has gone already
            oldest.shutdown(socket.SHUT_RDWR)
        return True

    def request_read(self, connection: socket.socket) -> None:
        """``connection``'s request has arrived: it is no longer one to make room with."""
        with self._open_changed:
            self._unread.pop(connection, None)

    def shutdown_request(self, request: Any) -> None:
        with self._open_changed:  # closed under the lock: stop_serving never shuts a closed one
            super().shutdown_request(request)
            self._open.discard(request)
            self._unread.pop(request, None)
            self._evicted.discard(request)
            self._open_changed.notify_all()

    def wait_connections_closed(self, timeout: float) -> bool:
        """Whether every connection's thread has closed it within ``timeout`` seconds."""
        with self._open_changed:
            return self._open_changed.wait_for(lambda: not self._open, max(timeout, 0.0))

    def shutdown(self) -> None:
        """The base's shutdown() waits for serve_forever(), which never runs here."""
        self.stop_serving()

    def stop_serving(self) -> None:
        """No more connections, and those open shut down: a thread waiting on its client reads
        the end at once, and the client sees the connection closed."""
        with self._open_changed:
            self._stopping.set()
            for connection in self._open:
                with contextlib.suppress(OSError):  # the client has gone already
                    connection.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):  # already closed: stopped before
            self._waker.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake.close()
        self._waker.close()


def _refuse(connection: socket.socket, cap: int) -> None:
    """Answer 503 without waiting: the few bytes fit any new connection's send buffer. What the
    client sent already is read first (closing with it unread would reset the connection)."""
    body = (f"too many connections to this driver's metrics port (at most {cap} at once); "
            "try again\n").encode()
    with contextlib.suppress(OSError):
        connection.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            connection.recv(65536)
        connection.send(b"HTTP/1.0 503 Service Unavailable\r\n"
                        b"Content-Type: text/plain; charset=utf-8\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n"
                        b"Retry-After: 1\r\nConnection: close\r\n"
                        b"X-Content-Type-Options: nosniff\r\n\r\n" + body)


class _ReadDeadline(io.RawIOBase):
    """The connection's bytes, each read given only the time left to the request's deadline:
    a per-read timeout alone would let a client trickling a byte at a time hold on for ever."""

    def __init__(self, connection: socket.socket, deadline: float) -> None:
        super().__init__()
        self._connection = connection
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not read within its deadline")
        self._connection.settimeout(left)
        return self._connection.recv_into(buffer)


class _ServerHandler(ServerHandler):
    """The standard library's, but what fails is ours to say through logging: it printed a
    traceback on the monitored app's stderr, for a page that failed and for a scraper too slow
    to take its answer (a write past the timeout), which is not news at all."""

    def log_exception(self, exc_info: tuple[type[BaseException], BaseException,
                                            TracebackType] | Any) -> None:
        environ = getattr(self, "environ", {})  # set by run() first (not in typeshed)
        where = f"{environ.get('REQUEST_METHOD')} {environ.get('PATH_INFO')}"
        if isinstance(exc_info[1], OSError):
            log.debug("sparkwatch: the client of %s went away or was too slow: %s", where,
                      exc_info[1])
        else:
            log.warning("sparkwatch: %s on the metrics port failed", where, exc_info=exc_info)


class _QuietHandler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_SECONDS  # see the constant; serve_metrics sets it per server

    def setup(self) -> None:
        super().setup()  # the socket's timeout (for writes) from ``timeout``
        assert self.timeout is not None
        self.rfile.close()  # the base's reader, without the deadline; the socket stays open
        self.rfile = io.BufferedReader(  # type: ignore[assignment] # the same reads, timed
            _ReadDeadline(self.connection, time.monotonic() + self.timeout))

    def handle(self) -> None:
        """One request; a client that is silent past the deadline, or gone, is closed. The
        base's, but for its handler, whose failures go to our log (:class:`_ServerHandler`)."""
        with contextlib.suppress(OSError):  # TimeoutError and ConnectionError among them
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.requestline = self.request_version = self.command = ""
                self.send_error(414)
                return
            if not self.parse_request():
                return
            handler = _ServerHandler(self.rfile, self.wfile,  # type: ignore[arg-type] # IO
                                     self.get_stderr(), self.get_environ(), multithread=False)
            # The base's back-pointer, for the access log (not in typeshed).
            handler.request_handler = self  # type: ignore[attr-defined]
            handler.run(self.server.get_app())  # type: ignore[attr-defined] # WSGIServer's

    def parse_request(self) -> bool:
        """A request whose connection was shut down by a stop is not answered. Once read, each
        write of the answer again has ``timeout`` (not what the read deadline left)."""
        server = self.server
        if (isinstance(server, _Server) and server.stopping) or not super().parse_request():
            return False
        if isinstance(server, _Server):
            server.request_read(self.connection)
        self.connection.settimeout(self.timeout)
        return True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """A scrape every few seconds is not news: nothing is written to stderr."""


def serve_metrics(registry: CollectorRegistry, address: str, port: int,
                  console: Console | None = None, *,
                  request_timeout: float = REQUEST_TIMEOUT_SECONDS,
                  max_connections: int = MAX_CONNECTIONS) -> MetricsServer:
    """Serve /metrics (and the console's pages) on a thread; ``request_timeout`` and
    ``max_connections`` as their constants say (the tests set them smaller)."""
    app = make_wsgi_app(registry)
    if console is not None:
        app = console_app(console, app)
    app = head_as_get(app)
    try:
        family, host = _best_family(address, port)
        server_class = type("Server", (_Server,), {"address_family": family,
                                                   "max_connections": max_connections})
        handler_class = type("Handler", (_QuietHandler,), {"timeout": request_timeout})
        server: WSGIServer = make_server(host, port, app, server_class,
                                         handler_class=handler_class)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ExporterError(
                f"metrics port {port} on {address} is already in use; choose another with "
                "SPARKWATCH_METRICS_PORT / spark.sparkwatch.metrics.port / metrics_port= "
                "(0 picks a free port)"
            ) from None
        raise ExporterError(f"cannot serve /metrics on {address}:{port}: {exc}") from None
    except ValueError as exc:  # UnicodeError: a name the resolver cannot be asked for
        raise ExporterError(f"cannot serve /metrics on {address!r}:{port}: {exc}") from None
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
