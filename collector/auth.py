"""Bearer tokens, compared in constant time: per-app ingest tokens (each in a tenant), an optional
admin read token (every tenant), read tokens scoped to one tenant, and a scrape token (/metrics).

Tokens never reach a log or an error message; errors say what was wrong, not what was sent.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass

from sparkwatch.collector.config import ANY_APP, DEFAULT_TENANT, split_scope


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


def _first_match(token: str, candidates: Iterable[tuple[str, str]]) -> str | None:
    """The owner of ``token`` among (owner, candidate) pairs. Compares with every candidate,
    always: the time taken says nothing about which one matched."""
    found = None
    for owner, candidate in candidates:
        if _matches(token, candidate) and found is None:
            found = owner
    return found


@dataclass(frozen=True, slots=True)
class Caller:
    """Who an ingest token speaks for: its tenant, and the app name it may push (``*``: any)."""

    tenant: str
    app: str


ALL_TENANTS = None
"""The read scope of the admin read token (and of open reads)."""


class Auth:
    def __init__(
        self, tokens: Iterable[tuple[str, str]], read_token: str | None, no_auth: bool = False,
        tenant_read_tokens: Iterable[tuple[str, str]] = (), scrape_token: str | None = None,
    ) -> None:
        self._tokens = list(tokens)
        self._read_token = read_token
        self._tenant_read_tokens = list(tenant_read_tokens)
        self._scrape_token = scrape_token
        self._no_auth = no_auth

    def replace_tokens(self, tokens: Iterable[tuple[str, str]]) -> None:
        """New ingest tokens, e.g. re-read on SIGHUP; in-flight checks finish with the old."""
        self._tokens = list(tokens)

    def tenant_count(self) -> int:
        """How many tenants the ingest tokens in force push for."""
        return len({split_scope(scope)[0] for scope, _ in self._tokens})

    @property
    def reads_protected(self) -> bool:
        return self._read_token is not None or bool(self._tenant_read_tokens)

    @property
    def scrape_protected(self) -> bool:
        return self._read_token is not None or self._scrape_token is not None

    def ingest_caller(self, header: str | None) -> Caller:
        """The tenant and app name the caller may push for."""
        if self._no_auth and not header:
            return Caller(DEFAULT_TENANT, ANY_APP)
        scope = _first_match(bearer_token(header), self._tokens)
        if scope is None:
            raise AuthError("invalid ingest token")
        return Caller(*split_scope(scope))

    def read_scope(self, header: str | None) -> str | None:
        """The tenant whose data the caller may read; None (:data:`ALL_TENANTS`) for the admin
        read token, or when reads are open."""
        if not self.reads_protected:
            return ALL_TENANTS
        token = bearer_token(header)
        admin = self._read_token is not None and _matches(token, self._read_token)
        tenant = _first_match(token, self._tenant_read_tokens)
        if admin:
            return ALL_TENANTS
        if tenant is None:
            raise AuthError("invalid read token")
        return tenant

    def check_read(self, header: str | None) -> None:
        self.read_scope(header)

    def check_scrape(self, header: str | None) -> None:
        """/metrics: the scrape token or the admin read token (tenant read tokens are not
        enough: /metrics holds every tenant's series)."""
        if not self.scrape_protected:
            return
        token = bearer_token(header)
        ok = [_matches(token, t) for t in (self._read_token, self._scrape_token) if t is not None]
        if not any(ok):
            raise AuthError("invalid scrape token")
