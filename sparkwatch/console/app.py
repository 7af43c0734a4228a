"""The console as one request handler, the same behind the driver's WSGI server and the
collector's FastAPI router: a path, its query parameters and the caller's tenant in, a
:class:`Response` out. Read-only by construction: it holds readers, never a writer."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sparkwatch.console import pages
from sparkwatch.console.assets import CSS, JS
from sparkwatch.console.history import HistoryData
from sparkwatch.console.live import States, live_detail, merge_detail, merge_overview, snapshot
from sparkwatch.console.model import QueryDetail
from sparkwatch.history.errors import HistoryError, UnknownQuery
from sparkwatch.model.contract import LIMITS, ContractViolation, check_text
from sparkwatch.summary import one_line

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""No inline script or style, nothing from another origin, no forms, no framing."""
SECURITY_HEADERS: tuple[tuple[str, str], ...] = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
)
OVERVIEW_REFRESH, QUERY_REFRESH, MAX_REFRESH = 5, 10, 3600
MAX_PAGE = 100_000


def is_console_path(path: str) -> bool:
    return path in ("/", "/console.css", "/console.js") or path.startswith("/queries/")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = field(default=SECURITY_HEADERS)


class BadParameter(ValueError):
    """A query parameter with a bad value: a 400 naming it."""


def _choice(params: Mapping[str, str], name: str, allowed: Mapping[str, object] | tuple[str, ...],
            default: str) -> str:
    value = params.get(name, default)
    if value not in allowed:
        raise BadParameter(f"{name}: expected one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def _int(params: Mapping[str, str], name: str, default: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or int(raw) > high:
        raise BadParameter(f"{name}: expected a whole number 0-{high}, got {raw[:40]!r}")
    return int(raw)


def _query_key(raw: str) -> str:
    """A query id or name as the history can hold one (the contract's text check): else 400,
    before any database sees a NUL, a lone surrogate or a megabyte."""
    try:
        return check_text(raw, "query", LIMITS.name_chars)
    except ContractViolation as exc:
        raise BadParameter(str(exc)) from None


class Console:
    """``history``: None when the app keeps no history (live points only). ``states``: the
    metric states a tenant may see (None: every tenant's)."""

    def __init__(self, history: HistoryData | None, states: States,
                 findings: bool = True) -> None:
        self.history = history
        self.states = states
        self.findings = findings

    def handle(self, path: str, params: Mapping[str, str], tenant: str | None) -> Response:
        """``path`` percent-decoded already (as WSGI's PATH_INFO and FastAPI's paths are)."""
        try:
            if path == "/console.css":
                return Response(200, CSS.encode(), "text/css; charset=utf-8")
            if path == "/console.js":
                return Response(200, JS.encode(), "text/javascript; charset=utf-8")
            if path == "/":
                return self._overview(params, tenant)
            if path.startswith("/queries/") and len(path) > len("/queries/"):
                return self._query(_query_key(path[len("/queries/"):]), params, tenant)
            return _error(404, f"no page at {path[:100]}")
        except BadParameter as exc:
            return _error(400, str(exc))

    def _overview(self, params: Mapping[str, str], tenant: str | None) -> Response:
        sort = _choice(params, "sort", pages.SORTS, "name")
        order = _choice(params, "order", ("asc", "desc"), "asc")
        refresh = _int(params, "refresh", OVERVIEW_REFRESH, MAX_REFRESH)
        notes: list[str] = []
        rows = []
        if self.history is not None:
            try:
                rows = self.history.overview(tenant)
            except HistoryError as exc:
                notes.append(f"history not readable yet: {one_line(exc)}")
        rows = merge_overview(rows, snapshot(self.states(tenant)))
        html = pages.overview(rows, sort, order == "desc", refresh, notes)
        return Response(200, html.encode())

    def _query(self, query: str, params: Mapping[str, str], tenant: str | None) -> Response:
        range_key = _choice(params, "range", pages.RANGES, pages.DEFAULT_RANGE)
        page = _int(params, "page", 0, MAX_PAGE)
        refresh = _int(params, "refresh", QUERY_REFRESH, MAX_REFRESH)
        seconds = pages.RANGES[range_key]
        since = None if seconds is None else datetime.fromtimestamp(time.time() - seconds, UTC)
        live = {q.query_id: q for q in snapshot(self.states(tenant))}
        detail: QueryDetail | None = None
        note = None
        if self.history is not None:
            try:
                detail = self.history.detail(query, tenant, since, page, self.findings)
            except UnknownQuery:
                detail = None
            except HistoryError as exc:
                note = f"history not readable: {one_line(exc)}"
        if detail is None:
            if query not in live:
                return _error(503 if note else 404, note or f"no query with id or name {query!r}")
            detail = live_detail(live[query])
            if note:
                detail.notes.append(note)
        else:
            merge_detail(detail, live.get(detail.query_id))
        return Response(200, pages.query_page(detail, range_key, page, refresh).encode())


def _error(status: int, message: str) -> Response:
    return Response(status, pages.error_page(status, message).encode())
