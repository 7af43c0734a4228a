"""Bearer tokens: per-app ingest tokens and an optional read token, compared in constant time.

Tokens never reach a log or an error message; errors say what was wrong, not what was sent.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from sparkwatch.collector.config import ANY_APP


class AuthError(Exception):
    """A request without valid credentials; ``status`` is 401."""

    status = 401


def bearer_token(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, or :class:`AuthError`."""
    if not header:
        raise AuthError("missing bearer token: send 'Authorization: Bearer <token>'")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError("malformed Authorization header: expected 'Bearer <token>'")
    return token.strip()


def _matches(token: str, candidate: str) -> bool:
    return hmac.compare_digest(token.encode(), candidate.encode())


class Auth:
    def __init__(
        self, tokens: Iterable[tuple[str, str]], read_token: str | None, no_auth: bool = False
    ) -> None:
        self._tokens = list(tokens)
        self._read_token = read_token
        self._no_auth = no_auth

    def replace_tokens(self, tokens: Iterable[tuple[str, str]]) -> None:
        """New ingest tokens, e.g. re-read on SIGHUP; in-flight checks finish with the old."""
        self._tokens = list(tokens)

    @property
    def reads_protected(self) -> bool:
        return self._read_token is not None

    def ingest_app(self, header: str | None) -> str:
        """The app name the caller may push for (``*``: any)."""
        if self._no_auth and not header:
            return ANY_APP
        token = bearer_token(header)
        allowed = None
        # Compare with every token, always: the time taken says nothing about which one matched.
        for app, candidate in self._tokens:
            if _matches(token, candidate) and allowed is None:
                allowed = app
        if allowed is None:
            raise AuthError("invalid ingest token")
        return allowed

    def check_read(self, header: str | None) -> None:
        if self._read_token is None:
            return
        token = bearer_token(header)
        if not _matches(token, self._read_token):
            raise AuthError("invalid read token")
