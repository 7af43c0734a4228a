"""Accepting pushed events: validate each, admit within the caps, spool, then fold into metrics.

The order is the guarantee: an event is in the spool (fsynced) before it reaches /metrics and
before the request is answered, so every acknowledged event reaches the history, even across a
crash. A redelivered event is harmless: the metric state ignores a (run id, batch id) it has
applied, and history writes are idempotent on it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sparkwatch.collector.config import ANY_APP
from sparkwatch.collector.fastjson import encode_record
from sparkwatch.collector.limits import Caps, SeriesIndex
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import (
    EventParseError,
    envelope_from_dict,
    envelope_to_dict,
    parse_envelope,
)
from sparkwatch.spool import Spool

INVALID = "invalid"
FORBIDDEN = "forbidden_app"
LIMIT = "limit"
SPOOL_RECORD_EVENTS = 500


@dataclass(frozen=True, slots=True)
class Rejection:
    index: int
    reason: str
    """invalid, forbidden_app or limit"""
    error: str


@dataclass(slots=True)
class Outcome:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[Rejection] = field(default_factory=list)

    @property
    def only_limits(self) -> bool:
        """Nothing accepted and everything refused by a cardinality cap."""
        return not self.accepted and bool(self.rejected) and all(
            r.reason == LIMIT for r in self.rejected
        )


class Ingestor:
    def __init__(
        self, state: MetricState, spool: Spool | None, caps: Caps, metrics: SelfMetrics
    ) -> None:
        self._state = state
        self._spool = spool
        self._caps = caps
        self._metrics = metrics
        # Admission, spooling and folding in one critical section: two requests must not both
        # take the last free query slot, and the spool keeps the order /metrics saw.
        self._lock = threading.Lock()

    def ingest(self, items: list[Any], allowed_app: str, strict_json: bool = False) -> Outcome:
        """Raises :class:`~sparkwatch.spool.SpoolUnavailable` (nothing accepted) when the
        spool has no room or its disk refuses the write. ``strict_json``: the items hold no NaN
        or Infinity (decoded by a strict parser), so the fast encoder may spool them. Empties
        ``items`` once validated (a large request must not hold them twice)."""
        outcome = Outcome()
        valid = self._validate(items, allowed_app, outcome)
        items.clear()  # the decoded JSON: freed before the spool record is encoded
        with self._lock:
            admitted = self._admit(valid, outcome)
            if admitted and self._spool is not None:
                # Records of SPOOL_RECORD_EVENTS, each encoded as it is written: a large request
                # is never encoded whole, nor read back whole by the history writer.
                self._spool.append_all(
                    encode_record([envelope_to_dict(p.envelope) for _, p in part], strict_json)
                    for part in _parts(admitted, SPOOL_RECORD_EVENTS))
            for _, parsed in admitted:
                if not self._state.apply(parsed):
                    outcome.duplicates += 1
        outcome.accepted = len(admitted)
        outcome.rejected.sort(key=lambda r: r.index)
        self._metrics.count_outcome(outcome.accepted, outcome.duplicates,
                                    [r.reason for r in outcome.rejected])
        return outcome

    def _validate(
        self, items: list[Any], allowed_app: str, outcome: Outcome
    ) -> list[tuple[int, ParsedEvent]]:
        valid = []
        for index, item in enumerate(items):
            try:
                parsed = parse_envelope(envelope_from_dict(item))
            except EventParseError as exc:
                outcome.rejected.append(Rejection(index, INVALID, str(exc)))
                continue
            if allowed_app not in (ANY_APP, parsed.app.name):
                outcome.rejected.append(Rejection(
                    index, FORBIDDEN,
                    f"event.app.name {parsed.app.name!r} is not the app this token pushes for",
                ))
                continue
            valid.append((index, parsed))
        return valid

    def _admit(
        self, valid: list[tuple[int, ParsedEvent]], outcome: Outcome
    ) -> list[tuple[int, ParsedEvent]]:
        if not valid:
            return []
        index = SeriesIndex(self._state)
        admitted = []
        for i, parsed in valid:
            refusal = index.refusal(parsed, self._caps)
            if refusal is None:
                admitted.append((i, parsed))
            else:
                outcome.rejected.append(Rejection(i, LIMIT, refusal))
        return admitted


def _parts(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
