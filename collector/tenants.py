"""Tenants: every tenant's apps, queries and runs in a metric state of its own.

A token belongs to a tenant (see :func:`~sparkwatch.collector.config.split_scope`), and whatever a
body names (app id and name, query id, run id) is only ever looked up in that tenant's state: no
body can reach another tenant's series, and one app id used by two tenants is two apps.

Query ids and run ids are Spark's UUIDs, unique across tenants in honest use, so the first tenant
to use one owns it: an event of another tenant naming it is refused (it would otherwise reach the
owner's rows in the history, which is keyed by run id). A run is also its app's and its
query's: one query of one Spark application reports it, so an event of another app (another app's
token) or of another query naming it is refused too, where it would have rewritten the run's app,
query name, status and exception. A query id is not (a query restarted from its checkpoint by
another application keeps it). Ownership is remembered for what is in memory here, and for what
left memory (an evicted query) while its events may still be in the spool, not yet in the
history (see :meth:`Tenants.evict`); the history writer checks the same against its rows (see
``history/tenancy.py``), and ingest asks the history about the ids memory does not know (see
``collector/owners.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import NamedTuple

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from sparkwatch.metrics.exposition import Families, add_state
from sparkwatch.metrics.profiles import FULL, Selection
from sparkwatch.metrics.state import MetricState, QueryState
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.tenant import TENANT_LABEL
from sparkwatch.plan.wire import PlanEvent


class Owner(NamedTuple):
    tenant: str
    app: str | None
    """the app name that reported a run first; None for a query id (any app's). Never None for
    a run: the history writer refuses another app's events naming a run, so ingest must know
    the app to refuse them first (see :func:`_kept`)"""
    provisional: bool = False
    """claimed while the history could not be asked whether another tenant owns it: asked
    again until it answers, and another tenant's events naming it wait (503) meanwhile"""
    query: str | None = None
    """the query id that reported a run first; None for a query id"""


class Contested(Exception):
    """An event names an id another tenant claimed while the history could not be asked: its
    owner is not known yet, so nothing of the request is accepted (send it again later)."""


class Tenants:
    """The metric state of each tenant, created on its first event, and who owns which ids."""

    def __init__(self, make_state: Callable[[], MetricState]) -> None:
        self._make_state = make_state
        self._lock = threading.Lock()
        self._states: dict[str, MetricState] = {}
        self._owners: dict[str, Owner] = {}
        """``q:``query id or ``r:``run id -> the tenant (and, for a run, the app) that used it
        first (of those in memory, and of those kept until written, see :meth:`evict`)"""
        self._unwritten: dict[str, float] = {}
        """Owner keys no query holds any more, kept in ``_owners`` while their events may not be
        in the history yet -> when their last event was ingested (at the latest)"""

    def state(self, tenant: str) -> MetricState:
        with self._lock:
            state = self._states.get(tenant)
            if state is None:
                state = self._states[tenant] = self._make_state()
            return state

    def items(self) -> list[tuple[str, MetricState]]:
        with self._lock:
            return sorted(self._states.items())

    def foreign(self, tenant: str, parsed: ParsedEvent | PlanEvent) -> str | None:
        """Why the event cannot be ``tenant``'s: the field (``payload.id``, ``payload.runId``)
        naming an id another tenant owns; None when the tenant owns them or they are new.
        Raises :class:`Contested` for an id another tenant only claimed provisionally."""
        with self._lock:
            for field, key in _event_ids(parsed):
                owner = self._owners.get(key)
                if owner is None:
                    continue
                if owner.tenant != tenant and owner.provisional:
                    raise Contested(f"{field} {key[2:]!r} was claimed while the history could "
                                    "not be asked who owns it; send again once it answers")
                if owner.tenant != tenant:
                    return (f"{field} {key[2:]!r} belongs to another tenant (ids are owned by the "
                            "tenant that used them first)")
                if owner.app not in (None, parsed.app.name):
                    return (f"{field} {key[2:]!r} is a run of another app (a run belongs to the "
                            "app that reported it first)")
                if owner.query not in (None, _query_id(parsed)):
                    return (f"{field} {key[2:]!r} is a run of another query (a run belongs to "
                            "the query that reported it first)")
        return None

    def unheld(self, tenant: str, plan: PlanEvent) -> str | None:
        """Why ``plan`` names nothing of ``tenant``'s: the field (``plan.run_id``,
        ``plan.query_id``) naming an id no event of the tenant used; None when it holds both.
        The history keeps a plan only for a run it holds for its tenant, so any other plan would
        be acknowledged and then quarantined."""
        with self._lock:
            for field, key in _event_ids(plan)[::-1]:
                owner = self._owners.get(key)
                if owner is None or owner.tenant != tenant:
                    return (f"{field} {key[2:]!r} names no run or query of this tenant: a plan "
                            "names the operators of a run whose events came first")
        return None

    def unknown(self, events: Iterable[ParsedEvent | PlanEvent]) -> tuple[set[str], set[str]]:
        """The run ids and query ids of ``events`` whose owner is not known for sure here."""
        runs: set[str] = set()
        queries: set[str] = set()
        with self._lock:
            for parsed in events:
                (_, query), (_, run) = _event_ids(parsed)
                if not self._sure(query):
                    queries.add(query[2:])
                if not self._sure(run):
                    runs.add(run[2:])
        return runs, queries

    def _sure(self, key: str) -> bool:
        owner = self._owners.get(key)
        return owner is not None and not owner.provisional

    def learn(self, owners: Mapping[str, Owner] | None, asked: tuple[set[str], set[str]]
              ) -> None:
        """What the history answered about the ``asked`` (run ids, query ids) memory was not
        sure of (see ``collector/owners.py``): its owners replace provisional claims, and a
        provisional claim of an id it does not hold stands as a first use. ``owners`` None: the
        history could not answer, and what is claimed meanwhile is provisional."""
        if owners is None:
            return
        with self._lock:
            for key in [*("r:" + r for r in asked[0]), *("q:" + q for q in asked[1])]:
                owner, claimed = owners.get(key), self._owners.get(key)
                if owner is not None and (claimed is None or claimed.provisional):
                    self._owners[key] = owner
                elif claimed is not None and claimed.provisional:
                    self._owners[key] = claimed._replace(provisional=False)

    def claim(self, tenant: str, parsed: ParsedEvent, provisional: bool = False) -> None:
        """Record ``tenant`` as the owner of the event's query id and run id, and its app and
        query as the run's (those not owned yet; see :meth:`foreign`), ``provisional`` while the
        history could not be asked about them."""
        with self._lock:
            for _, key in _event_ids(parsed):
                run = key.startswith("r:")
                self._owners.setdefault(key, Owner(
                    tenant, parsed.app.name if run else None, provisional,
                    parsed.event.query_id if run else None))
                if self._unwritten:  # a kept key used again: its query holds it from now on
                    self._unwritten.pop(key, None)

    def apply(self, tenant: str, parsed: ParsedEvent | PlanEvent,
              provisional: bool = False) -> bool:
        """Fold an event (or a plan) into its tenant's state, unless another tenant owns its ids
        (events restored from the spool: they were admitted, but a replay must not mix tenants
        either). A plan claims nothing: it names the operators of a query the tenant has.
        ``provisional``: claim its ids as not checked against the history (a replay at start:
        an event admitted on a provisional claim may name an id the history gives to another
        tenant; claimed for sure, it would have that tenant's own events refused for good)."""
        try:
            if self.foreign(tenant, parsed) is not None:
                return False
        except Contested:  # another tenant's replayed provisional claim: the writer decides
            return False
        if isinstance(parsed, PlanEvent):
            self.state(tenant).apply_plan(parsed.app, parsed.plan)
            return True
        self.claim(tenant, parsed, provisional)
        return self.state(tenant).apply(parsed)

    def evict(self, written_until: float | None = None, now: float | None = None) -> int:
        """Evict every tenant's stale queries, then forget the ids no query holds any more, but
        those whose last event was ingested at or after ``written_until`` (epoch seconds: the
        history pump's :meth:`~.pump.HistoryPump.written_until`, before which every spooled
        event is in the history). Such an id may still be in the spool only: forgotten, the
        history would not know it either, another tenant's events naming it would be
        acknowledged, and the writer would then quarantine them. It is kept, as it was, until a
        tick finds the writer past it (the history answers for it then): the ids kept are those
        of the queries evicted while the history lagged, each once. ``written_until`` None: no
        history (nothing is written, nothing to wait for). ``now``: when the tick runs (the
        clock by default), the time given to an id held by no query since before the tick
        began (an earlier run that left its query's remembered runs), whose last event is not
        known more precisely.

        Called under the ingestor's lock (:meth:`.Ingestor.evict`): no id is claimed or event
        applied meanwhile."""
        ingested = self._held()[1]  # before the eviction: the evicted queries' last events
        evicted = sum(state.evict() for _, state in self.items())
        held = self._held()[0]
        when = time.time() if now is None else now
        with self._lock:
            kept = _kept(self._owners, held)
            unwritten: dict[str, float] = {}
            if written_until is not None:
                for key, owner in self._owners.items():
                    if key in kept:
                        continue
                    last = max(ingested.get(key, -1.0), self._unwritten.get(key, -1.0))
                    if last < 0:  # claimed since the last tick, held by no query now
                        last = when
                    if last >= written_until:
                        kept[key] = owner
                        unwritten[key] = last
            self._owners, self._unwritten = kept, unwritten
        return evicted

    def unwritten(self) -> int:
        """How many ids no query holds are kept until the history has their events."""
        with self._lock:
            return len(self._unwritten)

    def _held(self) -> tuple[dict[str, Owner | None], dict[str, float]]:
        """Each owner key the tenants' queries hold, with the owner their state shows (None for
        a run whose app the state does not know: an earlier run of its query), and when the last
        event of a query holding it was ingested (its ``last_seen``)."""
        held: dict[str, Owner | None] = {}
        seen: dict[str, float] = {}
        for tenant, state in self.items():
            with state.read() as (_, queries):
                for q in queries:
                    for key, app in _ids(q):
                        run = key.startswith("r:")
                        owner = None if run and app is None else Owner(
                            tenant, app, query=q.query_id if run else None)
                        if held.get(key) is None:
                            held[key] = owner
                        if seen.get(key, q.last_seen) <= q.last_seen:
                            seen[key] = q.last_seen
        return held, seen


def _kept(known: Mapping[str, Owner], held: Mapping[str, Owner | None]) -> dict[str, Owner]:
    """The owners to keep for the ``held`` keys. What was known of one stays as it was: its
    first user's app and query (a query's state knows the app of its current run only: an
    earlier run rebuilt from it with no app let any app of the tenant name it, which the history
    writer then refused into the quarantine), and a provisional claim stays to be checked. A
    held run known neither way is left out: the history is asked about it, as about any id
    memory does not hold."""
    kept: dict[str, Owner] = {}
    for key, owner in held.items():
        known_owner = known.get(key, owner)
        if known_owner is not None:
            kept[key] = known_owner
    return kept


def _event_ids(parsed: ParsedEvent | PlanEvent) -> tuple[tuple[str, str], tuple[str, str]]:
    """(field, owner key) of the event's query id and run id."""
    if isinstance(parsed, PlanEvent):
        return ("plan.query_id", "q:" + parsed.query_id), ("plan.run_id", "r:" + parsed.run_id)
    event = parsed.event
    return ("payload.id", "q:" + event.query_id), ("payload.runId", "r:" + event.run_id)


def _query_id(parsed: ParsedEvent | PlanEvent) -> str:
    return parsed.query_id if isinstance(parsed, PlanEvent) else parsed.event.query_id


def _ids(q: QueryState) -> Iterator[tuple[str, str | None]]:
    """The owner keys a query holds, each with its app where it is known: its id, its current run
    (the app it holds) and the runs it remembers (earlier runs may have been another app's)."""
    yield "q:" + q.query_id, None
    if q.run_id:
        yield "r:" + q.run_id, q.app.name
    for run_id in q.applied_batches:
        yield "r:" + run_id, None


class TenantsCollector(Collector):
    """The catalogue for every tenant's queries, each series labelled with its ``tenant``."""

    def __init__(self, tenants: Tenants, selection: Selection = FULL) -> None:
        self._tenants = tenants
        self._exported = selection.filter

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        return self.collect_for(None)

    def collect_for(self, only: str | None) -> list[Metric]:
        """Every tenant's series, or tenant ``only``'s (its read token's exposition)."""
        out = Families(self._exported, (TENANT_LABEL,))
        for tenant, state in self._tenants.items():
            if only is None or tenant == only:
                out.set_scope((tenant,))
                add_state(out, state)
        return list(out)
