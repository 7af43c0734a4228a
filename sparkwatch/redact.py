"""One way to show a URL or a secret: everywhere a database URL, a push URL or a token is logged
or printed, it goes through here. Standard library only (the listener uses it in the driver).

A URL keeps what tells a reader where it points (scheme, user, host, port, path) and loses what
may be secret: the password becomes ``***`` and the query string, which can carry passwords and
tokens (``?password=``, ``sslkey=``), becomes ``?…``. Anything that does not parse as a URL is
never shown verbatim: it may be a password typed in the wrong place.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

UNPARSEABLE = "<unparseable URL>"
MASK = "***"
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-_]*)://")
"""A scheme as SQLAlchemy reads one: with ``_`` (``postgresql+psycopg_async``), which the
standard library's URL parser does not take as a scheme."""


def redact_url(url: str | Any) -> str:
    """``url`` (a string, or a SQLAlchemy URL) fit to show in a message or a log line."""
    if url is None:
        return ""
    if not isinstance(url, str):
        render = getattr(url, "render_as_string", None)
        url = render(hide_password=False) if render is not None else str(url)
    scheme = SCHEME.match(url)
    if scheme is None:
        return UNPARSEABLE
    try:
        parts = urllib.parse.urlsplit("x" + url[scheme.end(1):])
        port = parts.port  # raises ValueError on a port that is not a number
    except ValueError:
        return UNPARSEABLE
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    user = urllib.parse.unquote(parts.username) if parts.username else ""
    credentials = f"{user}:{MASK}@" if parts.password is not None else (
        f"{user}@" if user else "")
    netloc = credentials + host + (f":{port}" if port is not None else "")
    query = "?…" if parts.query else ""
    return f"{scheme.group(1)}://{netloc}{parts.path}{query}"


def redact_token(token: str | None) -> str:
    """A token as shown: never any of its characters."""
    return "" if not token else MASK
