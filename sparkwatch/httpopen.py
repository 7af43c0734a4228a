"""Open http(s) URLs only. Standard library only (the listener uses it in the driver).

``urllib.request.urlopen`` also opens ``file:``, ``ftp:`` and ``data:`` URLs: a push URL or a
collector URL set to ``file:///etc/passwd`` would read a local file. Every URL a user gives
(push, collector, /metrics) is opened here instead, and any other scheme is refused.
"""

from __future__ import annotations

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
