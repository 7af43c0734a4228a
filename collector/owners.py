"""Who owns the ids the collector's memory does not hold, asked of the history.

Memory alone (:class:`~.tenants.Tenants`) forgets an id when its query is evicted and everything
on a restart: another tenant could then claim an id the history gives to its owner, whose next
events were refused as another tenant's (the history writer leaves the claimer's out too: both
sides lost). So an event naming an id memory does not hold is checked against the history's runs
first. The lookup gives up within two seconds (``collector/reads.py``: a connect, a statement
or a migration's lock), and a history that made ingest wait that long without an answer (down,
locked) is not asked again for :data:`RETRY_SECONDS`: ingest must not wait long on a database
the spool exists to be independent of (one that refuses at once, e.g. not migrated yet, is
asked again at the next request). Ids first used meanwhile are claimed provisionally: asked
again once the history answers, which gives them to their owner, and another tenant's events
naming one wait (503) until then, instead of being refused for good as another tenant's (a
tenant could otherwise take an id over by pushing it while the history was locked).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sparkwatch.collector.tenants import Owner
from sparkwatch.summary import one_line

log = logging.getLogger(__name__)
RETRY_SECONDS = 30.0
FAST_FAILURE_SECONDS = 0.25
"""A lookup that failed sooner did not make ingest wait: it is not what the retry time is for."""

Lookup = Callable[[set[str], set[str]], dict[str, str]]
"""(run ids, query ids) -> ``run id`` -> tenant, ``a:run id`` -> app, ``qr:run id`` -> query,
``q:query id`` -> tenant (:func:`sparkwatch.history.tenancy.known_owners`)"""


class HistoryOwners:
    def __init__(self, lookup: Lookup, clock: Callable[[], float] = time.monotonic,
                 retry_seconds: float = RETRY_SECONDS) -> None:
        self._lookup, self._clock, self._retry_seconds = lookup, clock, retry_seconds
        self._asleep_until = 0.0

    def __call__(self, run_ids: set[str], query_ids: set[str]) -> dict[str, Owner] | None:
        """Owner keys (``r:``/``q:`` as :class:`~.tenants.Tenants` keeps them) of the ids the
        history holds; None while the history cannot answer."""
        if not (run_ids or query_ids):
            return {}
        if self._clock() < self._asleep_until:
            return None
        started = self._clock()
        try:
            found = self._lookup(run_ids, query_ids)
        except Exception as exc:  # noqa: BLE001 - down, not created or migrated yet, anything
            # else: ingest goes on with provisional claims rather than fail an acknowledged push
            if self._clock() - started < FAST_FAILURE_SECONDS:
                # Refused at once (not migrated yet, connection refused): asking again costs
                # nothing, and settles provisional claims as soon as it can.
                log.debug("owner lookup failed: %s", one_line(exc))
                return None
            self._asleep_until = self._clock() + self._retry_seconds
            log.info("ids not in memory are claimed provisionally for %gs: %s",
                     self._retry_seconds, one_line(exc))
            return None
        owners = {}
        for key, value in found.items():
            if key.startswith("q:"):
                owners[key] = Owner(value, None)
            elif not key.startswith(("a:", "qr:")):
                owners["r:" + key] = Owner(value, found.get("a:" + key),
                                           query=found.get("qr:" + key))
        return owners
