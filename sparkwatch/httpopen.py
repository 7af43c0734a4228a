"""Open http(s) URLs only. Standard library only (the listener uses it in the driver).

``urllib.request.urlopen`` also opens ``file:``, ``ftp:`` and ``data:`` URLs: a push URL or a
collector URL set to ``file:///etc/passwd`` would read a local file. Every URL a user gives
(push, collector, /metrics) is opened here instead, and any other scheme is refused.

Redirects are followed only where following cannot lose or leak anything: a GET, to the same
host and port (or from http up to https on that host, on the same port or 443). urllib's own
handler turns a redirected POST into a body-less GET (a push "delivered" to a page that never saw
the events), follows ``ftp:`` targets, and sends the Authorization header on to whatever host the
server names.

A request's deadline holds for the name lookup too: getaddrinfo has no timeout, and a DNS server
that never answers held the caller (the listener's push thread, the OTLP export thread, a local
collector's start) for as long as the system's resolver waited. Names are looked up in a daemon
thread (see :class:`Resolver`), for urllib's connections here and urllib3's in
:mod:`sparkwatch.otlp.transport`.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPResponse
from types import TracebackType
from typing import Any

SCHEMES = ("http", "https")


def url_host(host: str) -> str:
    """``host`` as a URL writes it: an IPv6 address in brackets (``http://::1:9750/`` is no URL)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class NotHttpError(ValueError):
    """A URL whose scheme is not http or https (the scheme named, never the URL)."""


class ResponseTooLarge(ValueError):
    """An answer longer than the caller's limit (a server that does not speak our protocol)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"answered with more than {limit} bytes")


class DeadlineExceeded(TimeoutError):
    """A whole request (connect, headers, body) took longer than its overall deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took longer than {seconds:g} s in all (a slow or stuck server)")


class LookupTimeout(TimeoutError):
    """No DNS answer in time for a host name, and no address known from an earlier one."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer from DNS within {seconds:.3g} s")


def check_http_url(url: str) -> str:
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        raise NotHttpError(f"only http:// and https:// URLs are allowed (got {scheme or 'no'} "
                           "scheme)")
    return url


def open_http(request: urllib.request.Request, timeout: float) -> HTTPResponse:
    """``urlopen(request)`` once its URL is checked to be http(s); raises :class:`NotHttpError`
    (a ValueError) otherwise, HTTPError/URLError/OSError as urlopen does. ``timeout`` bounds each
    socket operation, as urlopen's does, and the host name's lookup too (a
    :class:`LookupTimeout` past it, unless an earlier lookup gave an address)."""
    check_http_url(request.full_url)
    response: HTTPResponse = _opener(LookupBound(timeout)).open(  # nosec B310 - checked
        request, timeout=timeout)
    return response


def read_http(request: urllib.request.Request, timeout: float,
              limit: int | None = None) -> bytes:
    """The body of ``request``, as :func:`read_http_answer` reads it."""
    return read_http_answer(request, timeout, limit)[1]


def read_http_answer(request: urllib.request.Request, timeout: float,
                     limit: int | None = None) -> tuple[int, bytes]:
    """The status (a 2xx: any other is an HTTPError) and body of ``request``, the whole
    exchange within ``timeout`` seconds; raises :class:`DeadlineExceeded` past it,
    :class:`ResponseTooLarge` past ``limit`` bytes of body, otherwise as :func:`open_http` (an
    HTTPError's body, up to ``limit``, is read within the deadline too, and kept for
    ``exc.read()``).

    urlopen's timeout holds for each socket operation alone: a server sending a byte every few
    seconds kept a command waiting for as long as it liked. Past the deadline the connection's
    socket is shut down, which ends the read under way."""
    check_http_url(request.full_url)
    with Deadline(timeout) as deadline:
        opener = _opener(deadline)
        try:
            try:
                with opener.open(request, timeout=timeout) as response:  # nosec B310 - checked
                    status: int = response.status
                    body: bytes = _read_within(response, limit)
            except urllib.error.HTTPError as exc:
                error_body = exc.read() if limit is None else exc.read(limit)
                deadline.check()
                raise urllib.error.HTTPError(exc.url, exc.code, exc.msg, exc.hdrs,
                                             io.BytesIO(error_body)) from None
        except (OSError, ValueError, http.client.HTTPException) as exc:
            if not lookup_timed_out(exc):  # said as it is
                deadline.check()  # what the shut-down socket made the read raise is no reason
            raise
        deadline.check()  # a body read to the end of a shut-down socket is cut short
        return status, body


def _read_within(response: HTTPResponse, limit: int | None) -> bytes:
    if limit is None:
        return response.read()
    body = response.read(limit + 1)
    if len(body) > limit:
        raise ResponseTooLarge(limit)
    return body


class _SafeRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only for a GET to the same server (see :func:`_same_server`);
    otherwise the 3xx is the answer (an HTTPError naming its status)."""

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        if req.get_method() != "GET" or not _same_server(req.full_url, newurl):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _same_server(url: str, target: str) -> bool:
    """Whether ``target`` is served where ``url`` is: the same host and port, or the same host
    over https where ``url`` was http (an upgrade: on the same port or https's own, 443)."""
    old, new = urllib.parse.urlsplit(url), urllib.parse.urlsplit(target)
    schemes = old.scheme.lower(), new.scheme.lower()
    try:
        ports = [u.port or (443 if scheme == "https" else 80) for u, scheme in
                 zip((old, new), schemes, strict=True)]
    except ValueError:  # a port that is no number
        return False
    if new.hostname != old.hostname or schemes[1] not in SCHEMES:
        return False
    if schemes[0] == schemes[1]:
        return ports[0] == ports[1]
    return schemes == ("http", "https") and ports[1] in (ports[0], 443)


class Deadline:
    """Shuts down the socket of the request under way once ``seconds`` have passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._end = time.monotonic() + seconds
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Deadline:
        self._end = time.monotonic() + self.seconds
        self._timer.start()
        return self

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock
            if self.expired:
                _shut(sock)

    def check(self) -> None:
        if self.expired:
            raise DeadlineExceeded(self.seconds) from None

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shut(self._sock)


def _shut(sock: socket.socket) -> None:
    # socket.socket's own shutdown, also for an SSLSocket (whose override drops its SSL object
    # under the reading thread): the blocked read returns at once.
    with contextlib.suppress(OSError):  # already closed: nothing left to end
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class LookupBound:
    """The bound of a request whose socket no deadline shuts (:func:`open_http`: its caller
    reads the answer after the call): ``seconds`` for each name lookup, no socket watched."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def remaining(self) -> float:
        return self.seconds

    def watch(self, sock: socket.socket) -> None:
        """Nothing to shut: each socket operation keeps urlopen's own timeout."""


def lookup_timed_out(exc: BaseException) -> bool:
    """Whether ``exc`` came of a :class:`LookupTimeout` (raised as it is, as the reason of a
    URLError, or at the root of what urllib3 and requests made of it): said as it is, not as the
    deadline that passed meanwhile."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:  # a cycle ends here
        if isinstance(cause, LookupTimeout) or isinstance(getattr(cause, "reason", None),
                                                          LookupTimeout):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _opener(bound: Deadline | LookupBound) -> urllib.request.OpenerDirector:
    """urllib's opener, following only safe redirects, whose connections look host names up
    (and watch their sockets) within ``bound``."""
    return urllib.request.build_opener(
        _SafeRedirects, *(_watched_handler(base, bound)
                          for base in (urllib.request.HTTPHandler, urllib.request.HTTPSHandler)))


def _watched(base: type[http.client.HTTPConnection],
             deadline: Deadline | LookupBound) -> type[http.client.HTTPConnection]:
    class Watched(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            create: Any = self._create_connection  # type: ignore[has-type]

            def create_watched(address: tuple[str, int], *args: Any,
                               **kwargs: Any) -> socket.socket:
                sock: socket.socket = RESOLVER.connect(create, address, deadline.remaining(),
                                                       *args, **kwargs)
                deadline.watch(sock)  # from the start: a TLS handshake can drip too
                return sock

            self._create_connection = create_watched

        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)  # https: the TLS socket now holds the connection's fd

    return Watched


Address = tuple[str, int]
AddrInfo = list[tuple[Any, ...]]


class Resolver:
    """getaddrinfo within a deadline: each lookup runs in a daemon thread, which the caller
    stops waiting for at the deadline (a blocked getaddrinfo cannot be interrupted; the thread
    ends when the system's resolver gives up). One lookup of a name at a time: requests while it
    hangs wait on it, rather than leave a thread each. The last addresses a name had are kept:
    while a lookup hangs, they are used after half of the time left, leaving the connection the
    other half."""

    THREAD = "sparkwatch-resolve"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Address, threading.Event] = {}
        self._known: dict[Address, AddrInfo] = {}
        self._failed: dict[Address, OSError] = {}

    def connect(self, create: Any, address: Address, seconds: float, *args: Any,
                failures: tuple[type[Exception], ...] = (OSError,),
                **kwargs: Any) -> socket.socket:
        """``create`` (socket.create_connection, or urllib3's connect) to each address
        ``address``'s host has, the first that answers, with the name looked up within
        ``seconds``. ``failures`` are what ``create`` raises for an address that does not
        answer (the next is tried; the last one's error is raised); a lookup's own error, or
        :class:`LookupTimeout`, is an OSError."""
        host, port = address[0], address[1]
        if _numeric(host):
            return create(address, *args, **kwargs)  # nothing to look up
        error: Exception = OSError(f"getaddrinfo returned no address for port {port}")
        for family, _, _, _, sockaddr in self.lookup(host, port, seconds):
            try:
                sock: socket.socket = create((_written(family, sockaddr), sockaddr[1]), *args,
                                             **kwargs)
                return sock
            except failures as exc:
                error = exc
        raise error

    def lookup(self, host: str, port: int, seconds: float) -> AddrInfo:
        """``host``'s addresses (as getaddrinfo gives them for a TCP connection to ``port``);
        raises :class:`LookupTimeout` when none came in ``seconds`` and none is known, or the
        lookup's own error."""
        key = (host, port)
        with self._lock:
            done = self._pending.get(key)
            if done is None:
                done = threading.Event()
                thread = threading.Thread(target=self._look_up, args=(key, done),
                                          name=self.THREAD, daemon=True)
                try:
                    thread.start()
                except RuntimeError as exc:  # no thread to be had: said as a failed lookup
                    raise OSError(f"cannot look {host} up: {exc}") from None
                self._pending[key] = done  # once started: its end removes it
            known = self._known.get(key)
        if done.wait(seconds / 2 if known else seconds):
            with self._lock:
                found, failed = self._known.get(key), self._failed.get(key)
            if failed is not None or found is None:
                raise failed or LookupTimeout(seconds)
            return found
        if known:
            return known
        raise LookupTimeout(seconds)

    def _look_up(self, key: Address, done: threading.Event) -> None:
        try:
            found = socket.getaddrinfo(key[0], key[1], 0, socket.SOCK_STREAM)
            with self._lock:
                self._known[key] = found
                self._failed.pop(key, None)
        except OSError as exc:  # no such name, no network: said as the system says it
            with self._lock:
                self._failed[key] = exc
        finally:
            with self._lock:
                del self._pending[key]
            done.set()


def _written(family: int, sockaddr: tuple[Any, ...]) -> str:
    """An address as text, its IPv6 scope included: create_connection's own lookup of it is then
    immediate (no DNS)."""
    scoped = family == socket.AF_INET6 and sockaddr[3]
    return f"{sockaddr[0]}%{sockaddr[3]}" if scoped else str(sockaddr[0])


def _numeric(host: str) -> bool:
    """Whether ``host`` is an IP address (v6 possibly with a %scope), looked up by no one."""
    for family, text in ((socket.AF_INET, host), (socket.AF_INET6, host.partition("%")[0])):
        try:
            socket.inet_pton(family, text)
            return True
        except OSError:
            continue
    return False


RESOLVER = Resolver()


def _watched_handler(base: type[urllib.request.AbstractHTTPHandler],
                     deadline: Deadline | LookupBound) -> urllib.request.BaseHandler:
    """``base`` (urllib's http or https handler) opening watched connections."""

    class Handler(base):  # type: ignore[valid-type, misc]
        def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
            return super().do_open(_watched(http_class, deadline), req, **kwargs)

    return Handler()


def request_failure(exc: BaseException) -> str:
    """Why an HTTP request failed, fit to show (``top`` says it too). Not the exception's text:
    the ValueErrors of urllib and http.client quote what they refuse, a header value (``Bearer
    <token>``) or the URL (its query string may carry a token). What is shown is the status the
    server sent, the system's words for a socket error, urllib's own fixed reasons, or a name."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}".rstrip()
    if isinstance(exc, NotHttpError):
        return str(exc)  # names the scheme, never the URL
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        # A string reason is urllib's own ("no host given"), never the URL.
        return request_failure(reason) if isinstance(reason, BaseException) else str(reason)
    if isinstance(exc, (DeadlineExceeded, ResponseTooLarge, LookupTimeout)):
        return str(exc)  # our own words, never the URL
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror  # the system's words: "Connection refused", a DNS failure
    if isinstance(exc, ValueError):
        return "not a valid URL or header"
    return type(exc).__name__  # RemoteDisconnected, BadStatusLine: the name says it
