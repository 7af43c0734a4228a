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

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from sparkwatch.collector.auth import Caller
from sparkwatch.collector.body import exact_events
from sparkwatch.collector.config import ANY_APP, DEFAULT_TENANT
from sparkwatch.collector.fastjson import encode
from sparkwatch.collector.limits import Caps, SeriesIndex
from sparkwatch.collector.owners import HistoryOwners
from sparkwatch.collector.rates import RateLimited, Rates
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.collector.tenants import Owner, Tenants
from sparkwatch.model.contract import (
    LIMITS,
    ContractViolation,
    canonical_is_clean,
    check_envelope,
    normalize_rates,
)
from sparkwatch.model.events import ParsedEvent, QueryProgress, QueryTerminated
from sparkwatch.model.parse import (
    check_kept,
    envelope_from_dict,
    envelope_to_dict,
    parse_envelope,
)
from sparkwatch.plan.wire import PlanEvent, is_plan_item, plan_event_to_dict, plan_from_wire
from sparkwatch.spool import Spool

log = logging.getLogger(__name__)

INVALID = "invalid"
FORBIDDEN = "forbidden_app"
LIMIT = "limit"
SPOOL_RECORD_EVENTS = 500

Item = ParsedEvent | PlanEvent
"""An entry of a push: an event, or a run's plan (operator identity, see
:mod:`sparkwatch.plan.wire`), which names a query but never creates one."""


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


AHEAD_SECONDS = 86_400.0
"""How far ahead of the collector's clock an event's own time may be. A run's latest event time
only grows: one event from years ahead (a driver's clock far off, a made-up time) kept its run
"running" for good, never stalled nor ended by the run that replaced it."""
EARLIEST = datetime(2016, 1, 1, tzinfo=UTC).timestamp()
"""The earliest an event's own time may be: Structured Streaming came with Spark 2.0, in 2016.
An earlier time is a driver's clock that was never set, or a made-up one (a run ended in 1970)."""


def _outside_the_clock(parsed: Item, now: float) -> str | None:
    """Why an event's own time cannot be taken (more than a day ahead, or before any Spark
    could have sent it), or None."""
    if not isinstance(parsed, ParsedEvent):
        return None  # a plan: its time is when it was read, and it moves no run
    when = parsed.happened_at
    if EARLIEST <= when <= now + AHEAD_SECONDS:
        return None
    field = ("event.received_at" if isinstance(parsed.event, QueryTerminated)
             else f"{parsed.kind.value}.timestamp")
    if when < EARLIEST:
        return (f"{field}: {_iso(when)} is before {_iso(EARLIEST)}, before any Spark streaming "
                "query: is the driver's clock right?")
    return (f"{field}: {_iso(when)} is more than a day ahead of the collector's clock "
            f"({_iso(now)}): is the driver's clock right?")


def _iso(epoch: float) -> str:
    # isoformat: strftime's %Y writes the year 1 as "1", not "0001"
    return datetime.fromtimestamp(epoch, UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


class Ingestor:
    def __init__(
        self, tenants: Tenants, spool: Spool | None, caps: Caps, metrics: SelfMetrics,
        event_rates: Rates | None = None, history_owners: HistoryOwners | None = None,
        spool_share: Callable[[], int] | None = None,
        written_until: Callable[[], datetime] | None = None,
    ) -> None:
        """``spool_share``: the spool bytes one tenant's pending records may hold now (see
        :func:`~sparkwatch.settings.collector.spool_share`); None: the whole spool.
        ``written_until``: the history pump's (see :meth:`.HistoryPump.written_until`): an
        eviction keeps the ids of the events spooled since (see :meth:`.Tenants.evict`); None:
        no history."""
        self._written_until = written_until
        self._tenants = tenants
        self._history_owners = history_owners
        self._spool = spool
        self._spool_share = spool_share
        self._caps = caps
        self._metrics = metrics
        self._event_rates = event_rates
        # Admission, spooling and folding in one critical section: two requests must not both
        # take the last free query slot, and the spool keeps the order /metrics saw.
        self._lock = threading.Lock()

    def evict(self) -> int:
        """Evict stale series and forget the ids they held once the history has their events,
        with no request in between."""
        # Read before the lock: every event ingested before it is in the history, so a pump
        # that moves on meanwhile only makes the ids kept a few more than needed.
        written = None if self._written_until is None else self._written_until().timestamp()
        with self._lock:
            return self._tenants.evict(written)

    def ingest(self, items: list[Any], caller: Caller,
               strict_body: bytes | bytearray | None = None) -> Outcome:
        """Raises :class:`~sparkwatch.spool.SpoolUnavailable` (nothing accepted) when the
        spool has no room or its disk refuses the write. ``strict_body``: the request body, when
        orjson read ``items`` from it (see :func:`.fastjson.decode`): the contract's cheap check
        may then clear it whole; otherwise each event is checked value by value. Empties
        ``items`` once validated (a large request must not hold them twice). ``caller``: the
        token's tenant and app.

        Raises :class:`~.rates.RateLimited` (nothing accepted) when the caller's tenant is over
        its events-per-second quota."""
        self._take_quota(caller, len(items))
        checked = check_events(items, strict_body)
        items.clear()  # the decoded JSON: only the events' encodings are kept for the spool
        return self._accept(checked, caller)

    def ingest_checked(self, checked: Sequence[tuple[Item, bytes | None] | ContractViolation],
                       caller: Caller) -> Outcome:
        """:meth:`ingest` for events already through the contract (read typed, see
        :func:`~sparkwatch.collector.typedwire.typed_body`)."""
        self._take_quota(caller, len(checked))
        return self._accept(checked, caller)

    def _take_quota(self, caller: Caller, events: int) -> None:
        if self._event_rates is not None:
            try:
                self._event_rates.take(caller.tenant, events)
            except RateLimited:
                self._metrics.quota_rejected(caller.tenant, self._event_rates.quota, events)
                raise

    def _accept(self, checked: Sequence[tuple[Item, bytes | None] | ContractViolation],
                caller: Caller) -> Outcome:
        outcome = Outcome()
        valid = self._validate(checked, caller.app, outcome)
        known: dict[str, Owner] | None = {}
        asked: tuple[set[str], set[str]] = (set(), set())
        if self._history_owners is not None and valid:
            # Outside the lock: a database round trip, only for ids memory is not sure of.
            asked = self._tenants.unknown(p for _, p, _ in valid)
            known = self._history_owners(*asked)
        state = self._tenants.state(caller.tenant)
        with self._lock:
            # Learnt under the lock: an eviction in between rebuilds the owners from memory
            # alone and would forget them, letting this request claim another tenant's ids.
            self._tenants.learn(known, asked)
            admitted = self._admit(caller.tenant, valid, outcome, provisional=known is None)
            if admitted and self._spool is not None:
                # Records of SPOOL_RECORD_EVENTS: the history writer never reads a large request
                # back whole.
                # Events checked value by value were not kept encoded (a large body would be
                # held twice): encoded again here, one record at a time, as it is written.
                # Counted as the tenant's until the history has them: one tenant's backlog
                # (a slow history) must not fill the spool every tenant shares.
                self._spool.append_all(
                    (spool_record(caller.tenant, [encoded or encode(wire_of(parsed))
                                                  for _, parsed, encoded in part])
                     for part in _parts(admitted, SPOOL_RECORD_EVENTS)),
                    owner=caller.tenant,
                    share=None if self._spool_share is None else self._spool_share())
            for _, parsed, _ in admitted:
                if isinstance(parsed, PlanEvent):
                    state.apply_plan(parsed.app, parsed.plan)
                elif not state.apply(parsed):
                    outcome.duplicates += 1
        outcome.accepted = len(admitted)
        outcome.rejected.sort(key=lambda r: r.index)
        # The self-metric counts events, as its name says: a plan travels with them but is none.
        events = sum(1 for _, parsed, _ in admitted if not isinstance(parsed, PlanEvent))
        self._metrics.count_outcome(events, outcome.duplicates,
                                    [r.reason for r in outcome.rejected])
        return outcome

    def _validate(
        self, checked: Sequence[tuple[Item, bytes | None] | ContractViolation], allowed_app: str,
        outcome: Outcome,
    ) -> list[tuple[int, Item, bytes | None]]:
        valid, now = [], time.time()
        for index, result in enumerate(checked):
            if isinstance(result, ContractViolation):
                outcome.rejected.append(Rejection(index, INVALID, str(result)))
                continue
            parsed, encoded = result
            if allowed_app not in (ANY_APP, parsed.app.name):
                outcome.rejected.append(Rejection(
                    index, FORBIDDEN,
                    f"event.app.name {parsed.app.name!r} is not the app this token pushes for",
                ))
                continue
            untimely = _outside_the_clock(parsed, now)
            if untimely is not None:
                outcome.rejected.append(Rejection(index, INVALID, untimely))
                continue
            valid.append((index, parsed, encoded))
        return valid

    def _admit(
        self, tenant: str, valid: list[tuple[int, Item, bytes | None]], outcome: Outcome,
        provisional: bool = False,
    ) -> list[tuple[int, Item, bytes | None]]:
        """The events within the tenant's quotas whose ids the tenant owns (or now claims);
        plans of runs the tenant holds (a plan creates no series: it only names the operators
        of a run its tenant already has, and claims nothing)."""
        if not valid:
            return []
        for _, parsed, _ in valid:  # first, before any claim: the request waits whole
            self._tenants.foreign(tenant, parsed)  # raises Contested
        index = SeriesIndex(self._tenants.state(tenant))
        admitted: list[tuple[int, Item, bytes | None]] = []
        for i, parsed, encoded in valid:
            foreign = self._tenants.foreign(tenant, parsed)
            if foreign is not None:
                outcome.rejected.append(Rejection(i, FORBIDDEN, foreign))
                continue
            if isinstance(parsed, PlanEvent):
                unheld = self._tenants.unheld(tenant, parsed)
                if unheld is not None:
                    outcome.rejected.append(Rejection(i, INVALID, unheld))
                else:
                    admitted.append((i, parsed, encoded))
                continue
            refusal = index.refusal(parsed, self._caps)
            if refusal is not None:
                outcome.rejected.append(Rejection(i, LIMIT, refusal.message))
                self._metrics.quota_rejected(tenant, refusal.quota)
                continue
            self._tenants.claim(tenant, parsed, provisional)
            admitted.append((i, parsed, encoded))
        return admitted


def spool_record(tenant: str, encoded: list[bytes]) -> bytes:
    """One spool record: the events of one request's tenant. The default tenant's is a bare
    list, as every record was before tenants (see ``history_process.decode_records``)."""
    events = b"[" + b",".join(encoded) + b"]"
    if tenant == DEFAULT_TENANT:
        return events
    return b'{"tenant":' + encode(tenant) + b',"events":' + events + b"}"


_TENANT_PREFIX = b'{"tenant":'
_EVENTS_KEY = b',"events":'


def record_tenant(data: bytes) -> str:
    """The tenant of an encoded spool record (see :func:`spool_record`), read from its first
    bytes: the spool counts its pending records' tenants when it is opened, and decoding every
    record whole would cost as much as the restore itself. Never raises: a record that does not
    say is the default tenant's, as the history writer reads it."""
    if data.startswith(b"["):
        return DEFAULT_TENANT
    try:
        if data.startswith(_TENANT_PREFIX):
            # Tokens are comma-separated, so a tenant name holds no ',': the first
            # ',"events":' ends it.
            end = data.find(_EVENTS_KEY, len(_TENANT_PREFIX))
            with contextlib.suppress(orjson.JSONDecodeError):
                return _tenant_or_default(orjson.loads(data[len(_TENANT_PREFIX):end]))
        whole = orjson.loads(data)  # not as spool_record writes it: read whole, as the writer
    except orjson.JSONDecodeError:
        return DEFAULT_TENANT
    return _tenant_or_default(whole.get("tenant") if isinstance(whole, dict) else None)


def _tenant_or_default(tenant: Any) -> str:
    return tenant if isinstance(tenant, str) and tenant else DEFAULT_TENANT


def wire_of(item: Item) -> dict[str, Any]:
    """The wire form of an accepted entry, as it is spooled."""
    if isinstance(item, PlanEvent):
        return plan_event_to_dict(item)
    return envelope_to_dict(item.envelope)


def check_events(
    items: list[Any], strict_body: bytes | bytearray | None
) -> list[tuple[Item, bytes | None] | ContractViolation]:
    """Each event of a request through the contract: parsed and encoded as it will be spooled,
    or the violation naming its field. ``strict_body``: see :meth:`Ingestor.ingest`."""
    if strict_body is not None:
        cleared = _cleared(items, strict_body)
        if cleared is not None:
            return list(cleared)
        items = exact_events(strict_body) or items
    return [_one(index, item) for index, item in enumerate(items)]


def _one(index: int, item: Any) -> tuple[Item, bytes | None] | ContractViolation:
    try:
        parsed, _ = _checked(item, False)  # the encoding only measured: written later
        return parsed, None
    except ContractViolation as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - a bug must cost one event, never a 500
        log.exception("event %d of a request could not be checked", index)
        return ContractViolation(f"event: could not be read ({type(exc).__name__})")


def canonical_event(data: bytes) -> tuple[Item, bytes]:
    """One event of a canonical body that the typed reading left to the contract (a plan,
    another kind than progress): parsed as :func:`_cleared` parses it, with its encoding, which
    :func:`~.typedwire.typed_body` holds to the bytes it came in. Raises what the contract
    raises, and for JSON orjson refuses."""
    return _checked(orjson.loads(data), True)


def _cleared(items: list[Any], body: bytes | bytearray) -> list[tuple[Item, bytes]] | None:
    """Every event parsed and encoded, when the body is the canonical encoding of what was
    parsed (see :func:`~sparkwatch.model.contract.canonical_is_clean`): the common case, whose
    values then need no check one by one. None when any event or the body falls short."""
    try:
        checked = [_checked(item, True) for item in items]
    except Exception:  # noqa: BLE001 - a violation (or a bug): the exact check tells which
        return None
    canonical = b'{"events":[' + b",".join(encoded for _, encoded in checked) + b"]}"
    return checked if canonical_is_clean(body, canonical) else None


def _checked(item: Any, clean: bool) -> tuple[Item, bytes]:
    """One wire event through the whole contract: parsed, and encoded as it will be spooled.
    Raises :class:`ContractViolation` naming the field (or the event's size)."""
    if is_plan_item(item):
        plan = plan_from_wire(item)  # checks every value itself, clean body or not
        return plan, _within_size(encode(plan_event_to_dict(plan)))
    if not clean:
        payload = item.get("payload") if isinstance(item, dict) else None
        normalize_rates(payload)
    parsed = parse_envelope(envelope_from_dict(item))  # first: its messages are the most exact
    if not clean:
        check_envelope(item)
    elif isinstance(parsed.event, QueryProgress):
        payload = parsed.envelope.payload
        check_kept(parsed.event, {k: v for k, v in payload.items() if k not in _PARSED_WHOLE})
    return parsed, _within_size(encode(envelope_to_dict(parsed.envelope)))


# Payload fields the parser reads value by value; check_kept takes the rest, small, whole.
_PARSED_WHOLE = frozenset({"stateOperators", "sources", "observedMetrics"})


def _within_size(encoded: bytes) -> bytes:
    if len(encoded) > LIMITS.event_bytes:
        raise ContractViolation(f"event: {len(encoded)} bytes encoded is over the limit of "
                                f"{LIMITS.event_bytes} bytes for one event")
    return encoded


def _parts(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
