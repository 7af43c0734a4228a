"""`top` from a Prometheus exposition: an embedded exporter's or a collector's ``/metrics``."""

from __future__ import annotations

import math
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from sparkwatch.httpopen import read_http, request_failure
from sparkwatch.metrics import catalogue as cat
from sparkwatch.plan.describe import summary
from sparkwatch.plan.model import OperatorIdentity, Watermark
from sparkwatch.redact import redact_url
from sparkwatch.terminal import printable
from sparkwatch.top.model import Snapshot, TopOperator, TopQuery

TIMEOUT = 10.0
LIMIT = 1 << 30
"""The longest exposition read: 1 GiB, above the largest a fleet's collector serves (~800 MB for
3.4 million series, docs/benchmarks.md). A server answering without end is cut off here."""
NOT_AN_EXPOSITION = "answered something other than a Prometheus exposition ({})"

_QUERY_VALUES = {
    cat.QUERY_BATCH_ID.name: "batch_id",
    cat.QUERY_LAST_BATCH_DURATION.name: "batch_seconds",
    cat.QUERY_INPUT_RATE.name: "input_rate",
    cat.QUERY_PROCESSED_RATE.name: "processed_rate",
}
_OPERATOR_VALUES = {
    cat.STATE_ROWS.name: "rows",
    cat.STATE_LAST_ROWS_UPDATED.name: "updated",
    cat.STATE_LAST_ROWS_REMOVED.name: "removed",
    cat.STATE_LAST_ROWS_DROPPED.name: "dropped",
    cat.STATE_MEMORY.name: "memory_bytes",
    cat.STATE_LAST_COMMIT_TIME.name: "commit_seconds",
}
_OPERATOR_TOTALS = {
    cat.STATE_ROWS_UPDATED.name: 0, cat.STATE_ROWS_REMOVED.name: 1, cat.STATE_ROWS_DROPPED.name: 2,
}
"""The counters behind the last-batch columns, in :attr:`TopOperator.totals` order."""
_STATUS = {cat.QUERY_FAILED.name: "failed", cat.QUERY_IDLE.name: "idle"}


def fetch(url: str, token: str | None = None) -> str:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    # TIMEOUT for the whole read, not only each wait for a byte.
    return read_http(request, timeout=TIMEOUT, limit=LIMIT).decode("utf-8")


def snapshot_from_text(text: str, source: str, now: float | None = None) -> Snapshot:
    snap = Snapshot(source=source, taken_at=time.time() if now is None else now)
    queries: dict[tuple[str, str], TopQuery] = {}
    # Each query's operators by index: looked up once a sample, so a dict (a list scanned per
    # sample took minutes over 100,000 operator series of one query).
    operators: dict[tuple[str, str, int], TopOperator] = {}
    for name, labels, value in _samples(text):
        if "query_id" not in labels:
            continue
        query = _query(queries, labels)
        _apply(query, name, labels, value, operators)
    snap.queries = list(queries.values())
    for query in snap.queries:
        query.operators.sort(key=lambda op: op.index)
    return snap


def _samples(text: str) -> Iterable[tuple[str, dict[str, str], float]]:
    """Every sample with a finite value: NaN (a legal value, "unknown") or an infinity shows as
    no value, as a series that is not there does."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if math.isfinite(s.value):
                yield s.name, s.labels, s.value


def _query(queries: dict[tuple[str, str], TopQuery], labels: dict[str, str]) -> TopQuery:
    key = (labels.get("app_id", ""), labels["query_id"])
    query = queries.get(key)
    if query is None:
        query = queries[key] = TopQuery(app_id=key[0], query_id=key[1])
    query.name = labels.get("query_name", "") or query.name
    query.app_name = labels.get("app_name", "") or query.app_name
    return query


def _operator(query: TopQuery, labels: dict[str, str],
              known: dict[tuple[str, str, int], TopOperator]) -> TopOperator | None:
    """The operator a sample is of; None when its ``operator_index`` is no integer (that one
    series is passed over: it refused the whole exposition, every other query with it)."""
    index = _integer(labels["operator_index"])
    if index is None:
        return None
    op = known.get((*query.key, index))
    if op is None:
        op = known[(*query.key, index)] = TopOperator(index=index,
                                                      operator=labels.get("operator", ""))
        query.operators.append(op)
    return op


def _integer(text: str | None) -> int | None:
    """A label's integer; None for one that is absent, or no integer (an exposition's labels
    are any text)."""
    try:
        return int(text) if text else None
    except ValueError:  # also past Python's 4300 digits
        return None


def _milliseconds(seconds: str | None) -> int | None:
    """A label's seconds as whole milliseconds; None for one that is absent, no number, NaN,
    infinite or past what an int of a float holds."""
    try:
        ms = float(seconds) * 1000 if seconds else math.nan
    except ValueError:
        return None
    return int(ms) if math.isfinite(ms) else None


def _apply(query: TopQuery, name: str, labels: dict[str, str], value: float,
           operators: dict[tuple[str, str, int], TopOperator]) -> None:
    if name == cat.QUERY_INFO.name:
        query.run_id = labels.get("run_id", "")
    elif name == cat.QUERY_ACTIVE.name and value == 0 and query.status != "failed":
        query.status = "terminated"
    elif name in _STATUS and value == 1:
        query.status = _STATUS[name]
    elif name in _QUERY_VALUES:
        setattr(query, _QUERY_VALUES[name], value)
    elif name in (cat.QUERY_WATERMARK_LAG.name, cat.QUERY_EVENT_TIME_LAG.name):
        # The watermark lag wins; the event-time lag stands in for queries without watermark.
        if name == cat.QUERY_WATERMARK_LAG.name or query.lag_seconds is None:
            query.lag_seconds = value
    elif "operator_index" in labels:
        op = _operator(query, labels, operators)
        if op is not None:
            _apply_operator(op, name, labels, value)


def _apply_operator(op: TopOperator, name: str, labels: dict[str, str], value: float) -> None:
    if name == cat.STATE_OPERATOR_INFO.name:
        op.kind = labels.get("kind", "")
        if labels.get("source") == "plan":
            op.identity = summary(identity_from_labels(op, labels))
    elif name in _OPERATOR_VALUES:
        setattr(op, _OPERATOR_VALUES[name], value)
    elif name in _OPERATOR_TOTALS:
        totals = list(op.totals or (0.0, 0.0, 0.0))
        totals[_OPERATOR_TOTALS[name]] = value
        op.totals = (totals[0], totals[1], totals[2])


def identity_from_labels(op: TopOperator, labels: dict[str, Any]) -> OperatorIdentity:
    """The info metric's labels back into an identity (what ``summary`` words)."""
    column = labels.get("watermark_column")
    return OperatorIdentity(
        index=op.index,
        operator=op.operator,
        kind=labels.get("kind", ""),
        node=labels.get("kind", "") or None,  # set: the plan was read (summary() checks it)
        keys=tuple(k for k in labels.get("keys", "").split(",") if k),
        output_mode=labels.get("output_mode") or None,
        watermarks=(Watermark(column, _milliseconds(labels.get("watermark_delay_seconds"))),)
        if column
        else (),
        num_state_stores=_integer(labels.get("num_state_stores")),
        state_store_provider=labels.get("state_store_provider") or None,
        checkpoint_location=labels.get("checkpoint_location") or None,
    )


QUERIES_PATH = "/api/v1/metrics"
"""A collector's exposition of the caller's queries: a tenant's read token opens it (never
/metrics, which holds every tenant's series)."""


class CollectorReader:
    """A collector's queries: :data:`QUERIES_PATH`, else ``/metrics`` where that answers 401 or
    404 (a scrape token, which opens only /metrics; a collector from before it), kept once it
    answered."""

    def __init__(self, base: str, token: str | None) -> None:
        self.urls = [base.rstrip("/") + QUERIES_PATH, base.rstrip("/") + "/metrics"]
        self.token = token

    def __call__(self) -> Snapshot:
        snap = _read(self.urls[0], self.token, fallback=len(self.urls) > 1)
        if snap is None:
            self.urls.pop(0)
            return self()
        if snap.error is None:
            del self.urls[1:]  # the one that answered
        return snap


def read_metrics(url: str, token: str | None = None) -> Snapshot:
    snap = _read(url, token, fallback=False)
    assert snap is not None  # None only with a fallback
    return snap


def _read(url: str, token: str | None, fallback: bool) -> Snapshot | None:
    """A snapshot of the exposition at ``url``; None when it answered 401 or 404 and
    ``fallback`` (another URL is to be tried)."""
    source = redact_url(url)
    try:
        text = fetch(url, token)
    except urllib.error.HTTPError as exc:
        if fallback and exc.code in (401, 404):
            return None
        return Snapshot(source=source, taken_at=time.time(), error=request_failure(exc))
    except UnicodeDecodeError:
        return Snapshot(source=source, taken_at=time.time(), error=NOT_AN_EXPOSITION.format(
            "bytes that are no UTF-8 text"))
    except Exception as exc:  # noqa: BLE001 - show why on screen and keep polling
        # Not the exception's text: it may quote the Authorization header (the token).
        return Snapshot(source=source, taken_at=time.time(), error=request_failure(exc))
    try:
        return snapshot_from_text(text, source)
    except Exception as exc:  # noqa: BLE001 - an exposition top cannot parse; keep polling
        # The parser's own words where it has some ("Invalid line: ..."), else what it is.
        why = printable(str(exc).strip())[:200] or "a line that is no sample"
        return Snapshot(source=source, taken_at=time.time(),
                        error=NOT_AN_EXPOSITION.format(why))

