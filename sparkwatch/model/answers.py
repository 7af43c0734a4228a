"""The shapes of the collector's answers to an ingest, as its clients check them: the listener's
push sink (what counts as delivered or refused) and the demo's local collector (whether the one
answering on its port is ours). Standard library only: the listener runs in a Spark driver."""

from __future__ import annotations

from typing import Any


def is_ingest_result(body: Any) -> bool:
    """Whether ``body`` is the collector's answer to a batch it processed (its IngestResult,
    collector/models.py): how many events it accepted, how many of those it had seen, and the
    refused ones. Its 200, and its 429 (with an error's fields, :func:`is_collector_error`)."""
    return (isinstance(body, dict) and _count(body.get("accepted"))
            and _count(body.get("duplicates")) and isinstance(body.get("rejected"), list))


def is_collector_error(body: Any) -> bool:
    """Whether ``body`` is the collector's error answer: one line saying what was wrong, and the
    request's id (collector/routes/common.py ``error``, and request_context.py's answers made
    before the routes: both carry ``detail`` and ``request_id``). A proxy's page is no JSON; a
    web framework's error, or another service's, has no request id."""
    return (isinstance(body, dict) and isinstance(body.get("detail"), str)
            and isinstance(body.get("request_id"), str) and bool(body["request_id"]))


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
