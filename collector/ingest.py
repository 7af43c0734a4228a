"""Accepting pushed events: validate each, admit within the caps, spool, then fold into metrics.

Validation is the event model's contract (:mod:`sparkwatch.model.contract`): an event the contract
refuses is rejected on its own, with its field path, so what is accepted can always be stored and
rendered.

The order is the guarantee: an event is in the spool (fsynced) before it reaches /metrics and
before the request is answered, so every acknowledged event reaches the history, even across a
crash. A redelivered event is harmless: the metric state ignores a (run id, batch id) it has
applied, and history writes are idempotent on it.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from sparkwatch.collector.config import ANY_APP
from sparkwatch.collector.fastjson import encode
from sparkwatch.collector.limits import Caps, SeriesIndex
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.contract import LIMITS, ContractViolation, check_envelope
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import envelope_from_dict, envelope_to_dict, parse_envelope
from sparkwatch.spool import Spool

log = logging.getLogger(__name__)

INVALID = "invalid"
FORBIDDEN = "forbidden_app"
LIMIT = "limit"


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

    def ingest(self, items: list[Any], allowed_app: str, clean: bool = False) -> Outcome:
        """Raises :class:`~sparkwatch.spool.SpoolFull` (nothing accepted) when the
        spool has no room. ``clean``: the body's values are known to meet the contract (see
        :func:`.fastjson.decode`); otherwise each event is checked value by value first."""
        outcome = Outcome()
        valid = self._validate(items, allowed_app, clean, outcome)
        with self._lock:
            admitted = self._admit(valid, outcome)
            if admitted and self._spool is not None:
                self._spool.append_encoded(b"[" + b",".join(e for _, _, e in admitted) + b"]")
            for _, parsed, _ in admitted:
                if not self._state.apply(parsed):
                    outcome.duplicates += 1
        outcome.accepted = len(admitted)
        outcome.rejected.sort(key=lambda r: r.index)
        self._metrics.count_outcome(outcome.accepted, outcome.duplicates,
                                    [r.reason for r in outcome.rejected])
        return outcome

    def _validate(
        self, items: list[Any], allowed_app: str, clean: bool, outcome: Outcome
    ) -> list[tuple[int, ParsedEvent, bytes]]:
        valid = []
        for index, item in enumerate(items):
            try:
                parsed, encoded = _checked(item, clean)
            except ContractViolation as exc:
                outcome.rejected.append(Rejection(index, INVALID, str(exc)))
                continue
            except Exception as exc:  # noqa: BLE001 - a bug must cost one event, never a 500
                log.exception("event %d of a request could not be checked", index)
                outcome.rejected.append(Rejection(
                    index, INVALID, f"event: could not be read ({type(exc).__name__})"))
                continue
            if allowed_app not in (ANY_APP, parsed.app.name):
                outcome.rejected.append(Rejection(
                    index, FORBIDDEN,
                    f"event.app.name {parsed.app.name!r} is not the app this token pushes for",
                ))
                continue
            valid.append((index, parsed, encoded))
        return valid

    def _admit(
        self, valid: list[tuple[int, ParsedEvent, bytes]], outcome: Outcome
    ) -> list[tuple[int, ParsedEvent, bytes]]:
        if not valid:
            return []
        index = SeriesIndex(self._state)
        admitted = []
        for i, parsed, encoded in valid:
            refusal = index.refusal(parsed, self._caps)
            if refusal is None:
                admitted.append((i, parsed, encoded))
            else:
                outcome.rejected.append(Rejection(i, LIMIT, refusal))
        return admitted


def _checked(item: Any, clean: bool) -> tuple[ParsedEvent, bytes]:
    """One wire event through the whole contract: parsed, and encoded as it will be spooled.
    Raises :class:`ContractViolation` naming the field (or the event's size)."""
    if not clean:
        check_envelope(item)
    parsed = parse_envelope(envelope_from_dict(item))
    encoded = encode(envelope_to_dict(parsed.envelope))
    if len(encoded) > LIMITS.event_bytes:
        raise ContractViolation(f"event: {len(encoded)} bytes encoded is over the limit of "
                                f"{LIMITS.event_bytes} bytes for one event")
    return parsed, encoded
