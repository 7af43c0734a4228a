"""The session the SDK's OTLP/HTTP exporter sends with: bounded against a receiver that is not one.

The SDK's exporter posts through ``requests``, which reads the whole answer into memory and whose
timeout holds for each socket operation alone; and it takes any status below 400 for a success.
So a receiver answering a 2 GB body (or an endless chunked one) grew the driver by gigabytes, one
dripping its answer a byte at a time held the export thread for as long as it liked (an export of
70 s with a 3 s timeout), and one redirecting the POST (``allow_redirects`` is off, rightly: a
redirected POST arrives as a body-less GET) was counted as an export that worked.

Here each request is bounded as the push sink's are (:mod:`sparkwatch.httpopen`): the whole
exchange, connecting to the end of the answer, within the request's timeout (past it the socket
is shut down, which ends the read under way); at most :data:`REPLY_LIMIT` bytes of answer read
(decoded); a 3xx is a failed export, not followed. The SDK gets each as an error of the request:
not retried, logged once (redacted, :mod:`sparkwatch.otlp.export`), the export counted as failed.
The host name is looked up within the deadline too (:class:`sparkwatch.httpopen.Resolver`): a DNS
server that never answered held the export thread for the system resolver's whole wait (8 s and
more a request, whatever the timeout said).
"""

from __future__ import annotations

import threading
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError

from sparkwatch.httpopen import RESOLVER, Deadline, ResponseTooLarge, lookup_timed_out

REPLY_LIMIT = 1 << 20
"""Bytes of a receiver's answer read at most: an ``ExportMetricsServiceResponse`` is a partial
success count and a message, a few hundred bytes."""
DEFAULT_SECONDS = 10.0
"""The deadline of a request given no timeout (the SDK always gives one)."""

_current = threading.local()
"""The deadline of the request under way on this thread (the exporter's)."""


class Redirected(requests.exceptions.RequestException):
    """A receiver answering a 3xx: not followed (a redirected POST arrives as a GET without its
    metrics), a failed export."""

    def __init__(self, status: int) -> None:
        super().__init__(f"answered HTTP {status} (a redirect, not followed: set the endpoint to "
                         "where it points)")


def _watch(sock: Any) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None and sock is not None:
        deadline.watch(sock)


def _remaining() -> float:
    deadline = getattr(_current, "deadline", None)
    return deadline.remaining() if deadline is not None else DEFAULT_SECONDS


class _WatchedHTTP(HTTPConnection):
    def _new_conn(self) -> Any:
        try:
            sock = RESOLVER.connect(self._connect_to, (self._dns_host, self.port), _remaining(),
                                    failures=(ConnectTimeoutError,))
        except OSError as exc:  # the lookup's own: no such name, or no answer in time
            raise NameResolutionError(self.host, self, exc) from exc  # type: ignore[arg-type]
        _watch(sock)  # from the start: a TLS handshake can drip too
        return sock

    def _connect_to(self, address: tuple[str, int]) -> Any:
        # urllib3's own connect (its socket options, timeout and errors) to an address already
        # looked up: its getaddrinfo of a numeric host answers at once.
        host, self._dns_host = self._dns_host, address[0]
        try:
            return super()._new_conn()
        finally:
            self._dns_host = host

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        _watch(self.sock)  # a connection kept alive, or the TLS socket over the one watched
        return super().getresponse(*args, **kwargs)


class _WatchedHTTPS(_WatchedHTTP, HTTPSConnection):
    """The same, over TLS (HTTPSConnection connects through ``_new_conn``)."""


class _HTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTP


class _HTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPS


class _Adapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}


class BoundedSession(requests.Session):
    """A ``requests.Session`` whose every request is bounded (see the module's doc)."""

    def __init__(self, limit: int = REPLY_LIMIT) -> None:
        super().__init__()
        self.limit = limit
        adapter = _Adapter()
        self.mount("http://", adapter)
        self.mount("https://", adapter)

    def request(self, method: str, url: str,  # type: ignore[override]
                *args: Any, **kwargs: Any) -> requests.Response:
        timeout = kwargs.get("timeout")
        seconds = float(timeout) if isinstance(timeout, (int, float)) else DEFAULT_SECONDS
        kwargs["stream"] = True  # the body is read here, up to the limit
        kwargs["allow_redirects"] = False
        with Deadline(max(seconds, 0.001)) as deadline:
            _current.deadline = deadline
            try:
                try:
                    response = super().request(method, url, *args, **kwargs)
                except Exception as exc:
                    if not lookup_timed_out(exc):  # said as it is
                        deadline.check()  # what the shut-down socket made the request raise
                    raise
                try:
                    if 300 <= response.status_code < 400:
                        raise Redirected(response.status_code)
                    body = response.raw.read(self.limit + 1, decode_content=True) or b""
                    deadline.check()
                    if len(body) > self.limit:
                        raise ResponseTooLarge(self.limit)
                except Exception:
                    deadline.check()
                    raise
                finally:
                    response.close()  # what is unread is never read: the connection goes
                response._content = body
                response._content_consumed = True
                return response
            finally:
                _current.deadline = None
