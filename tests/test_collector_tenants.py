"""Tenant isolation, tried as a hostile tenant would, on a real collector process and a real
PostgreSQL history: token A naming B's app id, app name, query id or run id in any kind of event
changes nothing of B's (its /metrics series, history runs and batches, query state, stall marks),
checked by reading B's data before and after. Read tokens see their tenant only."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sparkwatch.top.metrics_source import CollectorReader
from tests.support import wait_for
from tests.tenants_support import (
    A_APP,
    A_READ,
    A_TOKEN,
    B_APP,
    B_READ,
    B_TOKEN,
    SCRAPE_TOKEN,
    accepted_all,
    beta_running_run,
    drained,
    event_of,
    fresh,
    history_of,
    tenant_collector,
    tenant_env,
    tenant_series,
)
from tests.test_collector_support import (
    READ_TOKEN,
    TOKEN,
    Collector,
    free_port,
    run_events,
    running,
)

pytestmark = pytest.mark.postgres

KINDS = ("started", "progress", "idle", "terminated")
B_QUERY, B_RUN = "b0000000-0000-4000-8000-000000000001", "b0000000-0000-4000-8000-0000000000a1"


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with tenant_collector(pg_admin_url, tmp_path_factory.mktemp("tenants")) as c:
        accepted_all(c, beta_running_run(B_QUERY, B_RUN), B_TOKEN)
        drained(c)
        # B's run sends nothing more: it is stalled within seconds (--stall-min-seconds 1).
        wait_for(lambda: len(c.get("/api/v1/stalls", B_READ, open="true").json()) == 1, 60,
                 "B's run to be marked stalled")
        wait_for(lambda: any(_stalled(line) for line in tenant_series(c, "beta")), 30,
                 "B's stalled gauge")
        yield c


def _stalled(line: str) -> bool:
    return line.startswith("spark_streaming_query_stalled{") and line.endswith(" 1.0")


def b_snapshot(c: Collector) -> tuple[list[str], dict[str, Any]]:
    return tenant_series(c, "beta"), history_of(c, B_READ)


def hostile_event(kind: str, field: str) -> dict[str, Any]:
    """An event of A's naming B's ``field`` (everything else A's own and new)."""
    app, ids = dict(A_APP), fresh()
    if field == "app.id":
        app["id"] = B_APP["id"]
    elif field == "app.name":
        app["name"] = B_APP["name"]
    elif field == "payload.id":
        ids["query_id"] = B_QUERY
    elif field == "payload.runId":
        ids["run_id"] = B_RUN
    elif field == "all":
        app, ids = dict(B_APP), {"query_id": B_QUERY, "run_id": B_RUN}
    return event_of(kind, app, ids["query_id"], ids["run_id"])


FIELDS = ("app.id", "app.name", "payload.id", "payload.runId", "all")
REFUSED = {"payload.id": "payload.id", "payload.runId": "payload.runId", "all": "payload.id"}


def test_token_a_naming_b_identities_changes_nothing_of_b(collector: Collector) -> None:
    before = b_snapshot(collector)
    assert any(_stalled(line) for line in before[0]), "B's stalled gauge is the baseline"
    assert before[1]["stalls"] and before[1]["queries"][0]["query_id"] == B_QUERY
    outcomes = {}
    for kind in KINDS:
        for field in FIELDS:
            response = collector.post([hostile_event(kind, field)], token=A_TOKEN)
            assert response.status_code == 200, response.text
            outcomes[(kind, field)] = response.json()
    drained(collector)
    after = b_snapshot(collector)
    assert after[0] == before[0]
    assert after[1] == before[1]
    for (kind, field), body in outcomes.items():
        if field in REFUSED:  # ids B owns: refused, naming the field
            assert body["accepted"] == 0, (kind, field, body)
            rejected = body["rejected"][0]
            assert rejected["reason"] == "forbidden_app"
            assert rejected["error"].startswith(REFUSED[field]), rejected
            assert "another tenant" in rejected["error"]
        else:  # an app id or name is only a name: A's own app, in A's tenant
            assert body["accepted"] == 1, (kind, field, body)


def test_the_same_app_id_in_two_tenants_is_two_apps(collector: Collector) -> None:
    ids = fresh()
    accepted_all(collector, run_events(app=B_APP, **ids)[:3], A_TOKEN)  # A names B's app id
    lines = collector.metrics(SCRAPE_TOKEN).splitlines()
    # query info (in the default profile) carries the app id: B's queries in B's tenant, A's
    # query under the same app id in A's
    infos = [line for line in lines if line.startswith("spark_streaming_query_info{")
             and f'app_id="{B_APP["id"]}"' in line]
    assert len(infos) >= 2 and {'tenant="alpha"' in i for i in infos} == {True, False}
    a_query = [line for line in lines if f'query_id="{ids["query_id"]}"' in line]
    assert a_query and all('tenant="alpha"' in line for line in a_query)


def test_read_tokens_see_their_tenant_only(collector: Collector) -> None:
    ids, running_ids = fresh(), fresh()
    accepted_all(collector, run_events(app=A_APP, **ids), A_TOKEN)
    # A run of A's own that stops reporting, so that A has a stall mark to see whatever ran
    # before this test (alone, A had none and the stall check below failed).
    accepted_all(collector, run_events(app=A_APP, **running_ids, terminated=False), A_TOKEN)
    drained(collector)
    wait_for(lambda: running_ids["query_id"] in {
        s["query_id"] for s in collector.get("/api/v1/stalls", A_READ).json()}, 60,
        "A's running run to be marked stalled")
    a_ids = {q["query_id"] for q in history_of(collector, A_READ)["queries"]}
    b_ids = {q["query_id"] for q in history_of(collector, B_READ)["queries"]}
    admin = {q["query_id"] for q in collector.get("/api/v1/queries", READ_TOKEN,
                                                  limit=1000).json()}
    assert ids["query_id"] in a_ids and B_QUERY in b_ids
    assert not a_ids & b_ids and a_ids | b_ids <= admin
    # Another tenant's query is unknown to a scoped token, exactly as a query that never was.
    for part in ("runs", "progress", "state", "rollups"):
        response = collector.get(f"/api/v1/queries/{B_QUERY}/{part}", A_READ)
        assert response.status_code == 404, (part, response.text)
    a_stalls = collector.get("/api/v1/stalls", A_READ).json()
    assert a_stalls and {s["query_id"] for s in a_stalls} <= a_ids  # A's own runs stalled too
    assert {s["query_id"] for s in history_of(collector, B_READ)["stalls"]} == {B_QUERY}
    assert collector.get("/api/v1/queries", "not-a-token").status_code == 401
    assert collector.get("/api/v1/queries").status_code == 401


def test_metrics_take_the_scrape_or_admin_token_never_a_tenant_read_token(
        collector: Collector) -> None:
    assert collector.get("/metrics", SCRAPE_TOKEN).status_code == 200
    assert collector.get("/metrics", READ_TOKEN).status_code == 200
    for token in (A_READ, A_TOKEN, None):
        assert collector.get("/metrics", token).status_code == 401


def test_a_tenant_read_token_reads_its_own_queries_series_and_top_shows_them(
        collector: Collector) -> None:
    """A tenant's read token never opens /metrics (every tenant's series): `top --collector`
    answered it 401, and a tenant could not watch its own queries live."""
    ids = fresh()
    accepted_all(collector, run_events(app=A_APP, **ids, terminated=False)[:3], A_TOKEN)
    answer = collector.get("/api/v1/metrics", A_READ)
    assert answer.status_code == 200 and answer.headers["cache-control"] == "no-store"
    samples = [line for line in answer.text.splitlines() if line and not line.startswith("#")]
    assert any(f'query_id="{ids["query_id"]}"' in line for line in samples)
    assert samples and all('tenant="alpha"' in line for line in samples)
    assert B_QUERY not in answer.text and "sparkwatch_collector_" not in answer.text
    every = collector.get("/api/v1/metrics", READ_TOKEN).text
    assert B_QUERY in every and ids["query_id"] in every
    for token in (SCRAPE_TOKEN, A_TOKEN, None):
        assert collector.get("/api/v1/metrics", token).status_code == 401
    mine = CollectorReader(collector.url, A_READ)()
    assert mine.error is None and ids["query_id"] in {q.query_id for q in mine.queries}
    assert B_QUERY not in {q.query_id for q in mine.queries}
    scraper = CollectorReader(collector.url, SCRAPE_TOKEN)  # /metrics, once the first is 401
    assert {ids["query_id"], B_QUERY} <= {q.query_id for q in scraper().queries}
    assert scraper.urls == [collector.url + "/metrics"]

def test_a_token_without_a_tenant_is_the_default_tenant(collector: Collector) -> None:
    ids = fresh()
    accepted_all(collector, run_events(**ids)[:2], TOKEN)
    lines = [line for line in collector.metrics(SCRAPE_TOKEN).splitlines()
             if f'query_id="{ids["query_id"]}"' in line]
    assert lines and all('tenant="default"' in line for line in lines)


def test_events_restored_from_the_spool_keep_their_tenant(tmp_path: Any) -> None:
    """The spool names each record's tenant: after a restart the events it still holds (the
    history unreachable) are back in /metrics under the tenant that pushed them."""
    unreachable = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nowhere"
    c = Collector(unreachable, tmp_path / "spool", env=tenant_env())
    ids = fresh()
    with running(c):
        accepted_all(c, run_events(app=A_APP, **ids), A_TOKEN)
        assert c.get("/readyz").json()["spool"]["pending_bytes"] > 0
    with running(c):
        lines = [line for line in c.metrics(SCRAPE_TOKEN).splitlines()
                 if f'query_id="{ids["query_id"]}"' in line]
        assert lines and all('tenant="alpha"' in line for line in lines)


def test_token_scopes_and_tenant_read_tokens_parse_and_refuse_naming_no_token() -> None:
    from sparkwatch.collector.config import parse_tenant_tokens, parse_tokens, split_scope

    tokens = parse_tokens("orders=t1,team-a/*=t2\nteam-b/etl=t3")
    assert [split_scope(scope) for scope, _ in tokens] == [
        ("default", "orders"), ("team-a", "*"), ("team-b", "etl")]
    assert parse_tenant_tokens("team-a=r1,team-b=r2") == (("team-a", "r1"), ("team-b", "r2"))
    for bad in ("a/b/c=secret-1", "/app=secret-1", "team/=secret-1"):
        with pytest.raises(ValueError) as exc:
            parse_tokens(bad)
        assert "secret-1" not in str(exc.value)
    with pytest.raises(ValueError, match="two tenants"):
        parse_tenant_tokens("a=same-secret,b=same-secret")
    with pytest.raises(ValueError, match="longer than 64"):
        parse_tenant_tokens(f"{'t' * 65}=secret-2")


def test_tenant_read_tokens_without_a_scrape_or_admin_token_are_refused_at_start() -> None:
    """Else /metrics would stay open and show every tenant's series to anyone."""
    from sparkwatch.collector.config import SettingsError, load_collector_settings

    env = {"SPARKWATCH_COLLECTOR_TOKENS": "a/*=ingest-1",
           "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS": "a=read-1"}
    with pytest.raises(SettingsError, match="SPARKWATCH_COLLECTOR_SCRAPE_TOKEN") as exc:
        load_collector_settings(env)
    assert "read-1" not in str(exc.value)
    settings = load_collector_settings({**env, "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN": "scrape-1"})
    assert settings.tenant_read_tokens == (("a", "read-1"),)


def test_an_id_is_free_again_once_its_query_is_evicted() -> None:
    from sparkwatch.collector.tenants import Tenants
    from sparkwatch.metrics.state import MetricState
    from sparkwatch.model.parse import envelope_from_dict, parse_envelope

    now = [1000.0]
    tenants = Tenants(lambda: MetricState(60.0, 60.0, clock=lambda: now[0]))
    ids = fresh()
    b_event = parse_envelope(envelope_from_dict(event_of("started", B_APP, ids["query_id"],
                                                         ids["run_id"])))
    a_event = parse_envelope(envelope_from_dict(event_of("started", A_APP, ids["query_id"],
                                                         ids["run_id"])))
    assert tenants.apply("beta", b_event)
    assert tenants.foreign("alpha", a_event) is not None
    now[0] += 61  # B's query vanished for longer than stale_seconds
    assert tenants.evict() == 1
    assert tenants.foreign("alpha", a_event) is None


def test_a_run_is_its_apps_and_a_query_any_apps_of_the_tenant() -> None:
    """One tenant, two apps: the second naming the first's run is refused naming the field (it
    would have ended or renamed that run); the same query under a run of its own is not (a query
    restarted by another application keeps its id)."""
    from sparkwatch.collector.tenants import Tenants
    from sparkwatch.metrics.state import MetricState
    from sparkwatch.model.parse import envelope_from_dict, parse_envelope

    tenants = Tenants(lambda: MetricState(60.0, 60.0))
    ids, other_run = fresh(), fresh()["run_id"]

    def parsed(kind: str, app: dict[str, str], run_id: str) -> Any:
        return parse_envelope(envelope_from_dict(event_of(kind, app, ids["query_id"], run_id)))

    assert tenants.apply("beta", parsed("started", B_APP, ids["run_id"]))
    for kind in KINDS:
        refusal = tenants.foreign("beta", parsed(kind, A_APP, ids["run_id"]))
        assert refusal == (f"payload.runId {ids['run_id']!r} is a run of another app (a run "
                           "belongs to the app that reported it first)"), kind
    assert tenants.foreign("beta", parsed("progress", B_APP, ids["run_id"])) is None
    assert tenants.foreign("beta", parsed("started", A_APP, other_run)) is None


def test_a_run_is_its_querys_and_another_query_naming_it_is_refused_until_evicted() -> None:
    """One app, two queries: the second naming the first's run (a copied run id) is refused
    naming the field, where it would have renamed that run and mixed the two queries' batches;
    the run stays its query's once evicted and known again (from the query's own runs)."""
    from sparkwatch.collector.tenants import Tenants
    from sparkwatch.metrics.state import MetricState
    from sparkwatch.model.parse import envelope_from_dict, parse_envelope

    now = [0.0]
    tenants = Tenants(lambda: MetricState(60.0, 60.0, clock=lambda: now[0]))
    ids, other_query = fresh(), fresh()["query_id"]

    def parsed(kind: str, query_id: str) -> Any:
        return parse_envelope(envelope_from_dict(event_of(kind, B_APP, query_id, ids["run_id"])))

    assert tenants.apply("beta", parsed("started", ids["query_id"]))
    for kind in KINDS:
        assert tenants.foreign("beta", parsed(kind, other_query)) == (
            f"payload.runId {ids['run_id']!r} is a run of another query (a run belongs to the "
            "query that reported it first)"), kind
    assert tenants.foreign("beta", parsed("progress", ids["query_id"])) is None
    assert tenants.evict() == 0  # still reporting: its owners rebuilt from the query's runs
    assert tenants.foreign("beta", parsed("progress", other_query)) is not None


def test_an_app_token_naming_another_apps_run_changes_nothing_of_it(
    pg_admin_url: str, tmp_path: Any
) -> None:
    """The default tenant: a run pushed with the any-app token, then the ``orders-etl`` token
    (its own app) naming that run: refused as forbidden, the run's history unchanged."""
    from tests.test_collector_support import APP_TOKEN, database_collector, scalar

    ids = fresh()
    mine = {"name": "etl-main", "id": "app-main-0001", "spark_version": "4.3.0"}
    orders = {"name": "orders-etl", "id": "app-orders-0001", "spark_version": "4.3.0"}
    env = {"SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN}
    with database_collector(pg_admin_url, tmp_path / "spool", env=env) as c:
        accepted_all(c, run_events(app=mine, **ids)[:3], TOKEN)
        forged = [event_of(kind, orders, ids["query_id"], ids["run_id"]) for kind in KINDS]
        body = c.post(forged, token=APP_TOKEN).json()
        drained(c)
        run = scalar(c.history_url, "select app_name || ' ' || status from query_runs "
                     "where run_id = :r", r=ids["run_id"])
    assert body["accepted"] == 0 and len(body["rejected"]) == len(KINDS), body
    assert {r["reason"] for r in body["rejected"]} == {"forbidden_app"}
    assert all("is a run of another app" in r["error"] for r in body["rejected"])
    assert run == "etl-main running"


def test_after_a_restart_the_history_still_gives_bs_ids_to_b(
    pg_admin_url: str, tmp_path: Any
) -> None:
    """A restart leaves memory empty: A naming B's query (with a run of its own) is refused, as
    the history gives that query to B, and B's next batch and B's restart of the query are
    accepted. Before, A's event claimed the id in memory: B's were refused, A's left out of the
    history, and both lost."""
    ids = fresh()
    with tenant_collector(pg_admin_url, tmp_path) as c:
        accepted_all(c, beta_running_run(ids["query_id"], ids["run_id"]), B_TOKEN)
        drained(c)
        c.stop()
        c.start()
        claim = c.post([event_of("started", A_APP, ids["query_id"], fresh()["run_id"])],
                       token=A_TOKEN).json()
        assert claim["accepted"] == 0, claim
        assert claim["rejected"][0]["error"] == (
            f"payload.id {ids['query_id']!r} belongs to another tenant (ids are owned by the "
            "tenant that used them first)")
        for event in (event_of("progress", B_APP, ids["query_id"], ids["run_id"]),
                      event_of("started", B_APP, ids["query_id"], fresh()["run_id"])):
            assert c.post([event], token=B_TOKEN).json()["accepted"] == 1, event["kind"]


def test_a_history_that_cannot_answer_is_not_asked_again_for_a_while() -> None:
    """Ingest never fails for a history that cannot answer, and waits on it once: a lookup that
    timed out (down, locked) is not tried again until the retry time has passed; one refused at
    once (its SQLite file not made yet by the writer: a fresh collector's first push) costs
    nothing and is tried again at the next request."""
    from sparkwatch.collector.owners import HistoryOwners
    from sparkwatch.collector.tenants import Owner
    from sparkwatch.history.errors import HistoryUnavailable, HistoryUrlError

    now, asked = [0.0], []

    def lookup(runs: set[str], queries: set[str]) -> dict[str, str]:
        asked.append((runs, queries))
        if len(asked) == 1:
            raise HistoryUrlError("no history database at /srv/h.db")
        if len(asked) == 2:
            now[0] += 2.0  # the lookup's own time limit
            raise HistoryUnavailable("history query failed: canceling statement due to "
                                     "statement timeout")
        return {"r1": "beta", "a:r1": "beta-orders", "qr:r1": "q1", "q:q1": "beta"}

    owners = HistoryOwners(lookup, clock=lambda: now[0], retry_seconds=30)
    assert owners({"r1"}, {"q1"}) is None  # could not answer: what is claimed is provisional
    assert owners({"r1"}, {"q1"}) is None and len(asked) == 2  # refused at once: asked again
    now[0] = 31.0
    assert owners({"r1"}, {"q1"}) is None and len(asked) == 2  # timed out at 2 s: until 32 s
    assert owners(set(), set()) == {}  # nothing to ask is an answer
    now[0] = 62.0
    assert owners({"r1"}, {"q1"}) == {"r:r1": Owner("beta", "beta-orders", query="q1"),
                                      "q:q1": Owner("beta", None)}


def test_an_eviction_after_the_history_answers_does_not_hand_bs_query_to_a() -> None:
    """The lookup runs outside the ingest lock; an eviction landing after it rebuilds the owners
    from memory alone. What the history said must still decide the request it was asked for:
    before, the eviction forgot it and A's event claimed B's query. The eviction runs where
    ingest, between the lookup and its lock, fetches the tenant's state."""
    from prometheus_client import CollectorRegistry

    from sparkwatch.collector.auth import Caller
    from sparkwatch.collector.ingest import Ingestor
    from sparkwatch.collector.limits import Caps
    from sparkwatch.collector.owners import HistoryOwners
    from sparkwatch.collector.selfmetrics import SelfMetrics
    from sparkwatch.collector.tenants import Tenants
    from sparkwatch.metrics.state import MetricState

    ids = fresh()
    evictions: list[int] = []

    class EvictedMeanwhile(Tenants):
        def state(self, tenant: str) -> MetricState:
            if not evictions:
                evictions.append(ingestor.evict())
            return super().state(tenant)

    def history(runs: set[str], queries: set[str]) -> dict[str, str]:
        return {"q:" + q: "beta" for q in queries if q == ids["query_id"]}

    ingestor = Ingestor(EvictedMeanwhile(lambda: MetricState(60.0, 60.0)), None,
                        Caps(max_apps=10, max_queries_per_app=10, max_operators_per_query=8),
                        SelfMetrics(CollectorRegistry()), history_owners=HistoryOwners(history))
    outcome = ingestor.ingest([event_of("started", A_APP, ids["query_id"], fresh()["run_id"])],
                              Caller("alpha", "*"))
    assert evictions == [0] and outcome.accepted == 0
    assert [r.reason for r in outcome.rejected] == ["forbidden_app"], outcome.rejected
    assert outcome.rejected[0].error.startswith(f"payload.id {ids['query_id']!r} belongs to "
                                                "another tenant")


def test_an_id_claimed_while_the_history_cannot_answer_goes_to_its_owner_once_it_does() -> None:
    """B's query is in the history, no longer in memory. While the history cannot answer
    (locked, failing over), A's event naming it is accepted, provisionally: before, that claim
    stood for good, and B's own events were refused as another tenant's, and lost."""
    from prometheus_client import CollectorRegistry

    from sparkwatch.collector.auth import Caller
    from sparkwatch.collector.ingest import Ingestor
    from sparkwatch.collector.limits import Caps
    from sparkwatch.collector.owners import HistoryOwners
    from sparkwatch.collector.selfmetrics import SelfMetrics
    from sparkwatch.collector.tenants import Contested, Tenants
    from sparkwatch.history.errors import HistoryUnavailable
    from sparkwatch.metrics.state import MetricState

    b_query, now, down = fresh()["query_id"], [0.0], [True]

    def history(runs: set[str], queries: set[str]) -> dict[str, str]:
        if down[0]:
            raise HistoryUnavailable("history query failed: canceling statement due to lock "
                                     "timeout")
        return {"q:" + q: "beta" for q in queries if q == b_query}

    ingestor = Ingestor(Tenants(lambda: MetricState(60.0, 60.0)), None,
                        Caps(max_apps=10, max_queries_per_app=10, max_operators_per_query=8),
                        SelfMetrics(CollectorRegistry()),
                        history_owners=HistoryOwners(history, clock=lambda: now[0]))
    a, b = Caller("alpha", "*"), Caller("beta", "*")

    def push(caller: Caller, app: dict[str, str]) -> Any:
        return ingestor.ingest([event_of("started", app, b_query, fresh()["run_id"])], caller)

    assert push(a, A_APP).accepted == 1  # provisional: the history could not be asked
    with pytest.raises(Contested, match=rf"payload.id {b_query!r} was claimed while the "
                       "history could not be asked who owns it; send again once it answers"):
        push(b, B_APP)  # 503 with Retry-After: B's push sink sends it again
    now[0], down[0] = 31.0, False  # the history answers again
    assert push(b, B_APP).accepted == 1
    refused = push(a, A_APP)
    assert [r.reason for r in refused.rejected] == ["forbidden_app"]
    assert refused.rejected[0].error.startswith(f"payload.id {b_query!r} belongs to another")


def test_a_provisional_claim_of_an_id_the_history_does_not_hold_stands_once_it_answers(
) -> None:
    from prometheus_client import CollectorRegistry

    from sparkwatch.collector.auth import Caller
    from sparkwatch.collector.ingest import Ingestor
    from sparkwatch.collector.limits import Caps
    from sparkwatch.collector.owners import HistoryOwners
    from sparkwatch.collector.selfmetrics import SelfMetrics
    from sparkwatch.collector.tenants import Tenants
    from sparkwatch.history.errors import HistoryUnavailable
    from sparkwatch.metrics.state import MetricState

    ids, now, asked = fresh(), [0.0], []

    def history(runs: set[str], queries: set[str]) -> dict[str, str]:
        asked.append((runs, queries))
        if now[0] < 31.0:
            raise HistoryUnavailable("history query failed: connection refused")
        return {}

    tenants = Tenants(lambda: MetricState(60.0, 60.0))
    ingestor = Ingestor(tenants, None,
                        Caps(max_apps=10, max_queries_per_app=10, max_operators_per_query=8),
                        SelfMetrics(CollectorRegistry()),
                        history_owners=HistoryOwners(history, clock=lambda: now[0]))
    started = event_of("started", A_APP, ids["query_id"], ids["run_id"])
    assert ingestor.ingest([started], Caller("alpha", "*")).accepted == 1
    now[0] = 31.0
    progress = event_of("progress", A_APP, ids["query_id"], ids["run_id"])
    assert ingestor.ingest([progress], Caller("alpha", "*")).accepted == 1
    assert asked[-1] == ({ids["run_id"]}, {ids["query_id"]})  # asked again, and answered
    assert ingestor.ingest([progress], Caller("alpha", "*")).duplicates == 1
    assert len(asked) == 2  # sure now: never asked again
    outsider = ingestor.ingest([event_of("progress", B_APP, ids["query_id"], ids["run_id"])],
                               Caller("beta", "*"))
    assert [r.reason for r in outsider.rejected] == ["forbidden_app"]


def test_an_owner_lookup_gives_up_within_seconds_behind_a_migrations_lock(pg_url: str) -> None:
    """Ingest waits on the lookup: a migration holding query_runs locked held every push naming
    an id memory did not hold (every app's first push after a restart) until it ended."""
    import time

    import sqlalchemy as sa

    from sparkwatch.collector.reads import LOOKUP_SECONDS, Reads
    from sparkwatch.history import migrate
    from sparkwatch.history.errors import HistoryUnavailable

    migrate.upgrade(pg_url)
    reads, holder = Reads(pg_url), sa.create_engine(pg_url)
    try:
        with holder.begin() as conn:
            conn.execute(sa.text("LOCK TABLE query_runs IN ACCESS EXCLUSIVE MODE"))
            start = time.monotonic()
            with pytest.raises(HistoryUnavailable, match="due to (lock|statement) timeout"):
                reads.owners({"a-run"}, {"a-query"})
            waited = time.monotonic() - start
        assert reads.owners({"a-run"}, {"a-query"}) == {}  # the lock gone: answered
    finally:
        reads.close()
        holder.dispose()
    assert LOOKUP_SECONDS <= waited < LOOKUP_SECONDS + 3, waited


@pytest.mark.parametrize("other", ["SPARKWATCH_COLLECTOR_READ_TOKEN",
                                   "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN",
                                   "SPARKWATCH_COLLECTOR_TOKENS"])
def test_a_tenant_read_token_that_is_also_another_roles_token_is_refused_at_start(
        other: str) -> None:
    """The admin match won in Auth.read_scope: alpha's read token read every tenant's data (or
    an ingest token's holder read alpha's)."""
    from sparkwatch.collector.config import SettingsError, load_collector_settings

    env = {"SPARKWATCH_COLLECTOR_TOKENS": "alpha/*=ingest-1",
           "SPARKWATCH_COLLECTOR_READ_TOKEN": "admin-1",
           "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN": "scrape-1",
           "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS": "alpha=alpha-1,beta=shared-secret-9"}
    env[other] = "alpha/*=shared-secret-9" if other.endswith("_TOKENS") else "shared-secret-9"
    with pytest.raises(SettingsError) as exc:
        load_collector_settings(env)
    message = str(exc.value)
    assert "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS" in message and other in message
    assert "shared-secret-9" not in message



@pytest.mark.parametrize("other", ["SPARKWATCH_COLLECTOR_READ_TOKEN",
                                   "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN"])
def test_an_ingest_token_that_is_also_the_admin_read_or_scrape_token_is_refused_at_start(
        other: str) -> None:
    """Every pushing driver holds its ingest token: as the admin read token it read every
    tenant's history, as the scrape token every tenant's series."""
    from sparkwatch.collector.config import SettingsError, load_collector_settings

    env = {"SPARKWATCH_COLLECTOR_TOKENS": "alpha/*=ingest-1,beta/*=shared-secret-9",
           other: "shared-secret-9"}
    with pytest.raises(SettingsError) as exc:
        load_collector_settings(env)
    message = str(exc.value)
    assert "SPARKWATCH_COLLECTOR_TOKENS" in message and other in message
    assert "shared-secret-9" not in message


def test_the_admin_read_token_may_also_be_the_scrape_token() -> None:
    """The admin read token opens /metrics already: sharing it with the scrape role grants
    nothing more."""
    from sparkwatch.collector.config import load_collector_settings

    settings = load_collector_settings({"SPARKWATCH_COLLECTOR_TOKENS": "alpha/*=ingest-1",
                                        "SPARKWATCH_COLLECTOR_READ_TOKEN": "admin-1",
                                        "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN": "admin-1"})
    assert settings.read_token == settings.scrape_token == "admin-1"
