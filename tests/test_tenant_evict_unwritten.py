"""An id stays its tenant's until the history holds it: an eviction tick keeps the ids of a query
whose last event was ingested after the history pump's ``written_until`` (its events may still be
in the spool only), and forgets them at a later tick, once the writer is past them (the history
answers for them then).

Before, a history lagging by more than the eviction grace (a slow or locked database) had a
terminated run's ids forgotten while its events were still spooled: another tenant's events
naming them were acknowledged (neither memory nor the history knew them), then quarantined by
the writer once the first tenant's rows were in. Acknowledged then quarantined, and repeated, the
shared quarantine filled."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sparkwatch.collector.auth import Caller
from sparkwatch.collector.ingest import Ingestor
from sparkwatch.collector.limits import Caps
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.collector.tenants import Tenants
from sparkwatch.metrics.state import RUNS_REMEMBERED, MetricState
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from tests.support import SettableClock, wait_for
from tests.tenants_support import (
    A_APP,
    A_TOKEN,
    B_APP,
    B_TOKEN,
    SCRAPE_TOKEN,
    accepted_all,
    drained,
    event_of,
    fresh,
    history_held,
    tenant_collector,
)
from tests.test_collector_support import Collector, samples

GRACE = 60.0


def parsed(kind: str, app: dict[str, str], ids: dict[str, str]) -> Any:
    return parse_envelope(envelope_from_dict(event_of(kind, app, ids["query_id"],
                                                      ids["run_id"])))


def tenants_on(clock: SettableClock) -> Tenants:
    return Tenants(lambda: MetricState(GRACE, 10 * GRACE, clock=clock))


def another_tenants(field: str, value: str) -> str:
    return (f"{field} {value!r} belongs to another tenant (ids are owned by the tenant that used "
            "them first)")


def terminated_run(tenants: Tenants, tenant: str, app: dict[str, str]) -> dict[str, str]:
    ids = fresh()
    for kind in ("started", "progress", "terminated"):
        assert tenants.apply(tenant, parsed(kind, app, ids))
    return ids


def test_an_evicted_run_not_yet_written_stays_its_tenants() -> None:
    clock = SettableClock(1_000.0)
    tenants = tenants_on(clock)
    ids = terminated_run(tenants, "alpha", A_APP)  # last event ingested at 1000
    clock.now += GRACE + 1
    assert tenants.evict(written_until=clock.now - 2 * GRACE, now=clock.now) == 1
    assert tenants.state("alpha").query(A_APP["id"], ids["query_id"]) is None  # evicted
    assert tenants.unwritten() == 2  # its query id and run id, kept
    # beta naming the run (in a query of its own) and naming the query: refused, field named
    other_query = {"query_id": fresh()["query_id"], "run_id": ids["run_id"]}
    assert tenants.foreign("beta", parsed("progress", B_APP, other_query)) == another_tenants(
        "payload.runId", ids["run_id"])
    other_run = {"query_id": ids["query_id"], "run_id": fresh()["run_id"]}
    assert tenants.foreign("beta", parsed("progress", B_APP, other_run)) == another_tenants(
        "payload.id", ids["query_id"])
    assert tenants.unknown([parsed("progress", B_APP, ids)]) == (set(), set())  # sure of both
    assert tenants.foreign("alpha", parsed("progress", A_APP, ids)) is None  # still alpha's

    # Ticks while the writer is still behind: kept, and counted once.
    for _ in range(3):
        clock.now += 5
        assert tenants.evict(written_until=999.0, now=clock.now) == 0
        assert tenants.unwritten() == 2
    assert tenants.foreign("beta", parsed("progress", B_APP, ids)) == another_tenants(
        "payload.id", ids["query_id"])

    # The writer passes its last event: forgotten at the next tick, the history answers now.
    assert tenants.evict(written_until=1_000.5, now=clock.now) == 0
    assert tenants.unwritten() == 0
    assert tenants.foreign("beta", parsed("progress", B_APP, ids)) is None
    assert tenants.unknown([parsed("progress", B_APP, ids)]) == ({ids["run_id"]},
                                                                  {ids["query_id"]})


def test_an_evicted_run_already_written_is_forgotten_at_once_and_without_a_history() -> None:
    """What was before: a healthy writer (past the run) or no history (nothing to wait for)."""
    for written_until in (1_000.5, None):
        clock = SettableClock(1_000.0)
        tenants = tenants_on(clock)
        ids = terminated_run(tenants, "alpha", A_APP)
        clock.now += GRACE + 1
        assert tenants.evict(written_until=written_until, now=clock.now) == 1
        assert tenants.unwritten() == 0
        assert tenants.foreign("beta", parsed("progress", B_APP, ids)) is None, written_until


def test_a_kept_id_used_again_by_its_tenant_is_held_again_then_kept_from_its_new_last_event(
) -> None:
    clock = SettableClock(1_000.0)
    tenants = tenants_on(clock)
    ids = terminated_run(tenants, "alpha", A_APP)
    clock.now += GRACE + 1
    tenants.evict(written_until=0.0, now=clock.now)
    assert tenants.unwritten() == 2
    clock.now += 1  # 1062: a redelivered termination, the query again in memory
    assert tenants.apply("alpha", parsed("terminated", A_APP, ids))
    assert tenants.unwritten() == 0
    assert tenants.evict(written_until=0.0, now=clock.now) == 0  # held: not kept, owned
    clock.now += GRACE + 1
    assert tenants.evict(written_until=1_061.5, now=clock.now) == 1  # past the first, not it
    assert tenants.unwritten() == 2
    assert tenants.foreign("beta", parsed("progress", B_APP, ids)) is not None
    assert tenants.evict(written_until=1_062.5, now=clock.now) == 0
    assert tenants.unwritten() == 0


def test_a_run_its_query_no_longer_remembers_is_kept_until_written() -> None:
    """A query restarted more than RUNS_REMEMBERED times between two ticks: its oldest run
    left the query's state before any tick saw its last event, which is taken as the tick's."""
    clock = SettableClock(1_000.0)
    tenants = tenants_on(clock)
    query = fresh()["query_id"]
    runs = [fresh()["run_id"] for _ in range(RUNS_REMEMBERED + 1)]
    for run in runs:
        assert tenants.apply("alpha", parsed("progress", A_APP,
                                             {"query_id": query, "run_id": run}))
    assert tenants.evict(written_until=999.0, now=1_010.0) == 0
    assert tenants.unwritten() == 1
    oldest = {"query_id": fresh()["query_id"], "run_id": runs[0]}
    assert tenants.foreign("beta", parsed("progress", B_APP, oldest)) == another_tenants(
        "payload.runId", runs[0])
    tenants.evict(written_until=1_009.0, now=1_020.0)
    assert tenants.unwritten() == 1  # the tick's time, not the query's last event
    tenants.evict(written_until=1_010.5, now=1_030.0)
    assert tenants.unwritten() == 0
    assert tenants.foreign("beta", parsed("progress", B_APP, oldest)) is None


def test_the_ids_kept_are_bounded_by_the_queries_evicted_meanwhile_and_dropped_once_written(
) -> None:
    clock = SettableClock(1_000.0)
    tenants = tenants_on(clock)
    for i in range(200):  # a run a second, each terminated, the writer stuck at 999
        clock.now = 1_000.0 + i
        terminated_run(tenants, "alpha" if i % 2 else "gamma", A_APP)
        if i % 10 == 9:
            tenants.evict(written_until=999.0, now=clock.now)
    kept = tenants.unwritten()
    assert kept == 2 * (200 - int(GRACE))  # each evicted query's two ids (ended by 1139), once
    clock.now += 2 * GRACE
    tenants.evict(written_until=999.0, now=clock.now)
    assert tenants.unwritten() == 400  # every query evicted, nothing written: all kept
    assert len(tenants._owners) == 400
    tenants.evict(written_until=1_100.5, now=clock.now)  # the writer halfway
    assert tenants.unwritten() == 2 * 99
    tenants.evict(written_until=clock.now, now=clock.now)
    assert tenants.unwritten() == 0 and tenants._owners == {}


def _ingestor(tenants: Tenants, written: list[float]) -> Ingestor:
    return Ingestor(tenants, None,
                    Caps(max_apps=10, max_queries_per_app=10, max_operators_per_query=8),
                    SelfMetrics(CollectorRegistry()),
                    written_until=lambda: datetime.fromtimestamp(written[0], UTC))


def test_another_tenants_push_naming_an_evicted_unwritten_run_is_refused_at_ingest() -> None:
    clock, written = SettableClock(1_000.0), [500.0]
    tenants = tenants_on(clock)
    ingestor = _ingestor(tenants, written)
    ids = fresh()
    outcome = ingestor.ingest([event_of(kind, A_APP, ids["query_id"], ids["run_id"])
                               for kind in ("started", "progress", "terminated")],
                              Caller("alpha", "*"))
    assert outcome.accepted == 3
    clock.now += GRACE + 1
    assert ingestor.evict() == 1
    theirs = {"query_id": fresh()["query_id"], "run_id": ids["run_id"]}
    refused = ingestor.ingest([event_of("progress", B_APP, theirs["query_id"],
                                        theirs["run_id"])], Caller("beta", "*"))
    assert refused.accepted == 0
    assert [(r.reason, r.error) for r in refused.rejected] == [
        ("forbidden_app", another_tenants("payload.runId", ids["run_id"]))]
    written[0] = clock.now  # the writer is past it
    assert ingestor.evict() == 0
    assert tenants.unwritten() == 0


# A real collector on PostgreSQL, its history held back by a lock on query_runs.



def _has_query(c: Collector, query_id: str) -> bool:
    return f'query_id="{query_id}"' in c.metrics(SCRAPE_TOKEN)


def _quarantined(c: Collector) -> float:
    return sum(v for _, v in samples(c.metrics(SCRAPE_TOKEN),
                                     "sparkwatch_collector_events_quarantined_total"))


def _pending(c: Collector) -> int:
    return int(c.get("/readyz").json()["spool"]["pending_bytes"])


@pytest.mark.postgres
def test_another_tenants_push_naming_a_spooled_evicted_run_is_refused_by_a_real_collector(
    pg_admin_url: str, tmp_path: Path,
) -> None:
    """A's run terminated and evicted (past grace) while its events wait in the spool behind
    a locked history: B's events naming its ids are refused (``forbidden_app``, the field
    named; the push answers 200 with each event's refusal), not acknowledged and then
    quarantined; once the history drains, the ids are the history's to answer for."""
    ids, decoy = fresh(), fresh()
    with tenant_collector(pg_admin_url, tmp_path, "--evict-interval-seconds", "0.2",
                          "--terminated-grace-seconds", "0.5", "--no-spool-fsync") as c:
        # the schema is there (a first write): the lock below holds the writer back
        accepted_all(c, [event_of("started", A_APP, decoy["query_id"], decoy["run_id"])],
                     A_TOKEN)
        drained(c)
        with history_held(c.history_url, "batches"):
            accepted_all(c, [event_of(kind, A_APP, ids["query_id"], ids["run_id"])
                             for kind in ("started", "progress", "terminated")], A_TOKEN)
            wait_for(lambda: not _has_query(c, ids["query_id"]), 30,
                     "an eviction tick to forget A's terminated query")
            assert _pending(c) > 0  # A's events still spooled only
            for field, named in (
                ("payload.id", {"query_id": ids["query_id"], "run_id": fresh()["run_id"]}),
                ("payload.runId", {"query_id": fresh()["query_id"], "run_id": ids["run_id"]}),
            ):
                _assert_refused(c, named, f"{field} {ids[field_key(field)]!r} belongs to "
                                "another tenant")
            assert _pending(c) > 0  # still behind the lock
        drained(c)
        assert _quarantined(c) == 0
        # Written: held by the history, which answers for the ids once memory forgets them.
        _assert_refused(c, {"query_id": fresh()["query_id"], "run_id": ids["run_id"]},
                        f"payload.runId {ids['run_id']!r} belongs to another tenant")
        drained(c)
        assert _quarantined(c) == 0


def field_key(field: str) -> str:
    return "query_id" if field == "payload.id" else "run_id"


def _assert_refused(c: Collector, named: dict[str, str], error: str) -> None:
    response = c.post([event_of("progress", B_APP, named["query_id"], named["run_id"])],
                      token=B_TOKEN)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["accepted"] == 0, body
    assert [r["reason"] for r in body["rejected"]] == ["forbidden_app"], body
    assert body["rejected"][0]["error"].startswith(error), body
