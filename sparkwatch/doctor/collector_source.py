"""Doctor's input from a sparkwatch collector's read API (``/api/v1/queries...``).

The collector records what the listeners push: progress, and each run's plan (operator identity,
pushed with the events), so findings from it name operators as the driver does. A run whose plan
was not pushed (Spark Connect, an older listener or collector) is named by its progress names.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

from sparkwatch.doctor.model import BatchPoint, QueryRecord
from sparkwatch.history.errors import HistoryUnavailable, UnknownQuery
from sparkwatch.history.views import state_point
from sparkwatch.httpopen import DeadlineExceeded, ResponseTooLarge, read_http, request_failure
from sparkwatch.plan.codec import plan_from_dict
from sparkwatch.plan.model import QueryPlan
from sparkwatch.redact import redact_url

PAGE = 1000
"""The API's largest page."""
MAX_PAGES = 1000
"""The most pages one listing may take (a million items: a fleet's queries are a hundred pages).
A server that ignores ``offset`` and answers full pages for ever is cut off here, or sooner, at
its first repeated page."""
TIMEOUT = 30.0
LIMIT = 256 << 20
"""The longest answer read: 256 MiB, many times a full page of the API. A server answering
without end is cut off here."""


class Api:
    def __init__(self, base_url: str, token: str | None) -> None:
        self._base = base_url.rstrip("/")
        self._token = token

    def get(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        url = f"{self._base}{path}" + (f"?{query}" if query else "")
        where = redact_url(self._base)
        try:
            # Built inside the try: Request() parses the URL and raises ValueError on a bad one.
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            if self._token:
                request.add_header("Authorization", f"Bearer {self._token}")
            # TIMEOUT for each whole request, not only each wait for a byte.
            body = read_http(request, timeout=TIMEOUT, limit=LIMIT)
        except urllib.error.HTTPError as exc:
            detail = _detail(exc)
            if exc.code == 404:
                raise UnknownQuery(detail) from None
            message = f"collector at {where} answered {exc.code}: {detail}"
            raise HistoryUnavailable(message) from None
        except (DeadlineExceeded, ResponseTooLarge) as exc:
            raise HistoryUnavailable(f"the collector at {where} {exc}") from None
        except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
            raise HistoryUnavailable(
                f"cannot reach the collector at {where}: {request_failure(exc)}") from None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
            raise HistoryUnavailable(f"the collector at {where} answered something other than "
                                     "JSON") from None

    def pages(self, path: str, **params: Any) -> list[Any]:
        out: list[Any] = []
        previous: Any = None
        for _ in range(MAX_PAGES):
            page = self.get(path, limit=PAGE, offset=len(out), **params)
            if not isinstance(page, list):
                raise NotTheReadApi(f"{path} answered no list")
            if page and page == previous:
                raise NotTheReadApi(f"{path} answered the same page at offset {len(out)}")
            out.extend(page)
            if len(page) < PAGE:
                return out
            previous = page
        raise NotTheReadApi(f"{path} answered more than {MAX_PAGES} full pages")

    def unexpected(self, why: str) -> HistoryUnavailable:
        return HistoryUnavailable(f"the collector at {redact_url(self._base)} answered what "
                                  f"its read API never does ({why}): is it a sparkwatch collector?")


class NotTheReadApi(Exception):
    """An answer whose shape is not the read API's."""


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read()).get("detail"))
    except Exception:  # noqa: BLE001 - any body: fall back to the status text
        return exc.reason or "error"


def load_from_collector(
    base_url: str, token: str | None, query: str | None, batches: int
) -> list[QueryRecord]:
    api = Api(base_url, token)
    try:
        if query:
            ids = [api.get(f"/api/v1/queries/{_quote(query)}/runs", limit=1)[0]["query_id"]]
        else:
            ids = [q["query_id"] for q in api.pages("/api/v1/queries")]
        records = [_record(api, query_id, batches) for query_id in ids]
    except NotTheReadApi as exc:
        raise api.unexpected(str(exc)) from None
    except LookupError:
        raise api.unexpected("an item without a field it always has") from None
    except (TypeError, AttributeError):
        raise api.unexpected("a value of another type") from None
    except ValueError:
        raise api.unexpected("a time or number that is none") from None
    return [r for r in records if r is not None]


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _record(api: Api, query_id: str, limit: int) -> QueryRecord | None:
    runs = api.pages(f"/api/v1/queries/{_quote(query_id)}/runs")
    run = next((r for r in runs if r["batches"]), None)
    if run is None:
        return None
    progress = api.get(f"/api/v1/queries/{_quote(query_id)}/progress", limit=min(limit, PAGE))
    rows = [p for p in progress if p["run_id"] == run["run_id"]]
    if not rows:
        return None
    state = api.pages(f"/api/v1/queries/{_quote(query_id)}/state", since=rows[0]["timestamp"])
    operators: dict[int, list[Any]] = {}
    first = rows[0]["batch_id"]
    for p in state:
        if p["run_id"] == run["run_id"] and p["batch_id"] >= first:
            operators.setdefault(p["operator_index"], []).append(state_point(p))
    return QueryRecord(
        query_id=query_id,
        name=run["name"],
        run_id=run["run_id"],
        batches=tuple(_batch_point(p) for p in rows),
        operators={i: tuple(sorted(ps, key=lambda o: o.batch_id)) for i, ps in operators.items()},
        plan=_plan(api, query_id, run["run_id"]),
    )


def _plan(api: Api, query_id: str, run_id: str) -> QueryPlan | None:
    """The run's plan, None when none was pushed (or the collector predates plans: 404)."""
    try:
        plans = api.get(f"/api/v1/queries/{_quote(query_id)}/plans", limit=PAGE)
    except UnknownQuery:
        return None
    return next((plan_from_dict(p) for p in plans if p["run_id"] == run_id), None)


def _epoch(value: str | None) -> float | None:
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _batch_point(p: dict[str, Any]) -> BatchPoint:
    return BatchPoint(
        batch_id=p["batch_id"],
        timestamp=_epoch(p["timestamp"]) or 0.0,
        duration_ms=p["batch_duration_ms"],
        input_rows=p["num_input_rows"],
        event_time_min=_epoch(p["event_time_min"]),
        event_time_max=_epoch(p["event_time_max"]),
        watermark=_epoch(p["watermark"]),
    )
