"""Open http(s) URLs only. Standard library only (the listener uses it in the driver).

``urllib.request.urlopen`` also opens ``file:``, ``ftp:`` and ``data:`` URLs: a push URL or a
collector URL set to ``file:///etc/passwd`` would read a local file. Every URL a user gives
(push, collector, /metrics) is opened here instead, and any other scheme is refused.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPResponse

SCHEMES = ("http", "https")


class NotHttpError(ValueError):
    """A URL whose scheme is not http or https (the scheme named, never the URL)."""


def check_http_url(url: str) -> str:
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        raise NotHttpError(f"only http:// and https:// URLs are allowed (got {scheme or 'no'} "
                           "scheme)")
    return url


def open_http(request: urllib.request.Request, timeout: float) -> HTTPResponse:
    """``urlopen(request)`` once its URL is checked to be http(s); raises :class:`NotHttpError`
    (a ValueError) otherwise, HTTPError/URLError/OSError as urlopen does."""
    check_http_url(request.full_url)
    response: HTTPResponse = urllib.request.urlopen(  # nosec B310 - scheme checked just above
        request, timeout=timeout)
    return response


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
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror  # the system's words: "Connection refused", a DNS failure
    if isinstance(exc, ValueError):
        return "not a valid URL or header"
    return type(exc).__name__  # RemoteDisconnected, BadStatusLine: the name says it
