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
from sparkwatch.console.live import (
    States,
    live_detail,
    merge_detail,
    merge_overview,
    snapshot,
    status_of,
)
from sparkwatch.console.model import (
    OVERVIEW_PAGE,
    RUNNING,
    SILENT,
    SILENT_SECONDS,
    QueryCounts,
    QueryDetail,
    QueryRow,
)
from sparkwatch.console.notes import hidden
from sparkwatch.history.errors import HistoryError, UnknownQuery
from sparkwatch.metrics.state import QueryState
from sparkwatch.model.contract import LIMITS, ContractViolation, check_text

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
OVERVIEW_REFRESH, QUERY_REFRESH, MAX_REFRESH = pages.OVERVIEW_REFRESH, pages.QUERY_REFRESH, 3600
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
    # ASCII digits only: str.isdigit() also takes '²' (which int() refuses) and '٣' (read as 3).
    if not (raw.isascii() and raw.isdigit()) or int(raw) > high:
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
                 findings: bool = True, log_name: str = "the driver's log") -> None:
        self.history = history
        self.states = states
        self.findings = findings
        self.log_name = log_name
        """Where readers are told a failure's detail was logged (they are not shown it)."""
        if history is not None:
            history.where = log_name

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
        sort = _choice(params, "sort", pages.SORTS, "status")
        order = _choice(params, "order", ("asc", "desc"), "asc")
        refresh = _int(params, "refresh", OVERVIEW_REFRESH, MAX_REFRESH)
        page = _int(params, "page", 0, MAX_PAGE)
        now = time.time()
        live = snapshot(self.states(tenant))
        notes: list[str] = []
        listed: tuple[list[QueryRow], QueryCounts] | None = None
        if self.history is not None:
            try:
                listed = self._history_page(tenant, page, live, now)
            except HistoryError as exc:
                notes.append(hidden("history not readable yet", exc, self.log_name))
        rows, counts = listed if listed is not None else _live_page(live, page, now)
        html = pages.overview(rows, sort, order == "desc", refresh, notes, counts, page, now)
        return Response(200, html.encode())

    def _history_page(self, tenant: str | None, page: int, live: list[QueryState],
                      now: float) -> tuple[list[QueryRow], QueryCounts]:
        """The history's page and counts, with the live state's newer word on its queries:
        a live query counts by its live status; one the history does not know yet is listed
        on the first page."""
        assert self.history is not None
        rows, counts = self.history.overview(tenant, page, now)
        known = self.history.latest_of([q.query_id for q in live], tenant)
        for q in live:
            if q.query_id in known:
                status, last_event = known[q.query_id]
                counts.add(_history_status(status, last_event, now), -1)
            counts.add(status_of(q))
        on_page = {r.query_id for r in rows}
        shown = [q for q in live
                 if q.query_id in on_page or (page == 0 and q.query_id not in known)]
        return merge_overview(rows, shown, now), counts

    def _query(self, query: str, params: Mapping[str, str], tenant: str | None) -> Response:
        range_key = _choice(params, "range", pages.RANGES, pages.DEFAULT_RANGE)
        page = _int(params, "page", 0, MAX_PAGE)
        ops_page = _int(params, "ops", 0, MAX_PAGE)
        refresh = _int(params, "refresh", QUERY_REFRESH, MAX_REFRESH)
        seconds = pages.RANGES[range_key]
        since = None if seconds is None else datetime.fromtimestamp(time.time() - seconds, UTC)
        live = {q.query_id: q for q in snapshot(self.states(tenant))}
        detail: QueryDetail | None = None
        note = None
        unknown = f"no query with id or name {query!r}"
        if self.history is not None:
            try:
                detail = self.history.detail(query, tenant, since, page, self.findings, ops_page)
            except UnknownQuery as exc:
                # Its words, not "no query": a prefix of several ids is answered by giving
                # more of the id, and the history's location is not in them.
                unknown = exc.message
            except HistoryError as exc:
                note = hidden("history not readable yet", exc, self.log_name)
        if detail is None:
            if query not in live:
                return _error(503 if note else 404, note or unknown)
            detail = live_detail(live[query])
            if note:
                detail.notes.append(note)
        else:
            merge_detail(detail, live.get(detail.query_id))
        html = pages.query_page(detail, range_key, page, refresh, ops_page)
        return Response(200, html.encode())


def _history_status(status: str, last_event: float | None, now: float) -> str:
    """A history status as the overview shows it without the live state (:func:`merge_overview`
    marks a running query silent after :data:`SILENT_SECONDS` without an event)."""
    if status == RUNNING and (last_event is None or now - last_event > SILENT_SECONDS):
        return SILENT
    return status


def _live_page(live: list[QueryState], page: int, now: float
               ) -> tuple[list[QueryRow], QueryCounts]:
    """Without a readable history: the live state's queries, paged here the same way."""
    rows = merge_overview([], live, now)
    counts = QueryCounts()
    for r in rows:
        counts.add(r.status)
    rows.sort(key=pages.SORTS["status"])
    return rows[page * OVERVIEW_PAGE:(page + 1) * OVERVIEW_PAGE], counts


def _error(status: int, message: str) -> Response:
    return Response(status, pages.error_page(status, message).encode())
