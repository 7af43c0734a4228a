"""The history keeps each tenant's runs its own, on SQLite and PostgreSQL: a run id or query id
belongs to the tenant that wrote it first, another tenant's events naming it are left out of the
write (whatever the collector's memory knows), reads filter by tenant, and migration 0008 keeps
every existing row (in tenant ``default``)."""

from __future__ import annotations

import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.schema import QueryRun, QueryStall
from tests.test_history_support import (
    batch_of,
    counts,
    engine_for,
    fetch,
    load_sample,
    progress,
    started,
    terminated,
    writer,
)

B_QUERY, B_RUN = "b1000000-0000-4000-8000-000000000001", "b1000000-0000-4000-8000-0000000000b1"
A_QUERY, A_RUN = "a1000000-0000-4000-8000-000000000001", "a1000000-0000-4000-8000-0000000000a1"


def b_run(url: str) -> dict[str, object]:
    raw = load_sample("window_agg")
    with writer(url) as w:
        w.write([started(B_QUERY, B_RUN, "beta-q", "2026-11-20T10:00:00.000Z"),
                 progress({**batch_of(raw, 0, "2026-11-20T10:00:05.000Z"),
                           "id": B_QUERY, "runId": B_RUN})], ["beta", "beta"])
    return {"runs": fetch(url, "query_runs"), "counts": counts(url)}


def test_another_tenants_events_never_reach_a_run_or_query_it_does_not_own(
        history_url: str) -> None:
    migrate.upgrade(history_url)
    before = b_run(history_url)
    raw = load_sample("window_agg")
    hostile = [
        terminated(B_QUERY, B_RUN, "2026-11-20T10:01:00.000Z", exception="by A"),
        progress({**batch_of(raw, 7, "2026-11-20T10:01:00.000Z"), "id": B_QUERY, "runId": B_RUN}),
        progress({**batch_of(raw, 8, "2026-11-20T10:01:00.000Z"), "id": B_QUERY, "runId": A_RUN}),
        started(A_QUERY, B_RUN, "alpha-q", "2026-11-20T10:01:00.000Z"),
    ]
    own = started(A_QUERY, "a1000000-0000-4000-8000-0000000000a2", "alpha-q",
                  "2026-11-20T10:01:00.000Z")
    with writer(history_url) as w:
        w.write([*hostile, own], ["alpha"] * (len(hostile) + 1))
    runs = {r["run_id"]: r for r in fetch(history_url, "query_runs")}
    assert runs[B_RUN] == before["runs"][0]  # B's run: not ended, not renamed, same batches
    assert [b["batch_id"] for b in fetch(history_url, "batches", B_RUN)] == [0]
    assert A_RUN not in runs  # a run of A's under B's query id: left out with its batch
    assert runs["a1000000-0000-4000-8000-0000000000a2"]["tenant"] == "alpha"
    assert counts(history_url)["batches"] == before["counts"]["batches"]


def test_a_refused_event_claims_nothing_for_the_events_after_it(history_url: str) -> None:
    """A names B's query with a run id new to the history, in the same write as B's first event
    of that run: A's event is refused and B's run is written, not lost as if A owned it."""
    migrate.upgrade(history_url)
    b_run(history_url)
    raw = load_sample("window_agg")
    new_run = "b1000000-0000-4000-8000-0000000000b2"
    hostile = progress({**batch_of(raw, 1, "2026-11-20T10:02:00.000Z"),
                        "id": B_QUERY, "runId": new_run})
    genuine = started(B_QUERY, new_run, "beta-q", "2026-11-20T10:02:00.000Z")
    with writer(history_url) as w:
        w.write([hostile, genuine], ["alpha", "beta"])
    runs = {r["run_id"]: r for r in fetch(history_url, "query_runs")}
    assert runs[new_run]["tenant"] == "beta"


def test_another_apps_events_never_reach_a_run_it_did_not_report(history_url: str) -> None:
    """In one tenant, an app naming another app's run (its own token, the run id guessed or
    seen): its end, its batch and a start under that run are left out; the run keeps its app,
    status and batches. The same query under a run of its own is written (a query restarted by
    another application keeps its id)."""
    import dataclasses

    from sparkwatch.model.events import AppInfo, ParsedEvent

    def of_other_app(parsed: ParsedEvent) -> ParsedEvent:
        other = AppInfo("other-app", "app-other-0001", "4.3.0")
        return dataclasses.replace(
            parsed, envelope=dataclasses.replace(parsed.envelope, app=other))

    migrate.upgrade(history_url)
    before = b_run(history_url)
    raw = load_sample("window_agg")
    own_run = "b1000000-0000-4000-8000-0000000000b9"
    forged = [
        terminated(B_QUERY, B_RUN, "2026-11-20T10:01:00.000Z", exception="forged"),
        progress({**batch_of(raw, 1, "2026-11-20T10:01:00.000Z"), "id": B_QUERY, "runId": B_RUN}),
        started(B_QUERY, B_RUN, "renamed", "2026-11-20T10:01:00.000Z"),
    ]
    with writer(history_url) as w:
        w.write([of_other_app(e) for e in forged], ["beta"] * len(forged))
    [run] = fetch(history_url, "query_runs")
    assert run == before["runs"][0]  # not ended, not renamed, still the first app's
    assert [b["batch_id"] for b in fetch(history_url, "batches", B_RUN)] == [0]
    with writer(history_url) as w:
        w.write([of_other_app(started(B_QUERY, own_run, "beta-q", "2026-11-20T10:02:00.000Z"))],
                ["beta"])
    runs = {r["run_id"]: r for r in fetch(history_url, "query_runs")}
    assert runs[own_run]["app_name"] == "other-app"


def test_another_querys_events_never_reach_a_run_it_did_not_report(history_url: str) -> None:
    """In one app, another query naming a run (its id copied): its start, batch and end under
    that run are left out; the run keeps its query, name, status and batches."""
    migrate.upgrade(history_url)
    before = b_run(history_url)
    other = "b1000000-0000-4000-8000-00000000000f"
    forged = [
        started(other, B_RUN, "renamed", "2026-11-20T10:01:00.000Z"),
        progress({**batch_of(load_sample("window_agg"), 1, "2026-11-20T10:01:00.000Z"),
                  "id": other, "runId": B_RUN}),
        terminated(other, B_RUN, "2026-11-20T10:01:00.000Z", exception="forged"),
    ]
    with writer(history_url) as w:
        w.write(forged, ["beta"] * len(forged))
    [run] = fetch(history_url, "query_runs")
    assert run == before["runs"][0]
    assert [b["batch_id"] for b in fetch(history_url, "batches", B_RUN)] == [0]


def test_a_plan_naming_a_run_under_another_query_of_its_tenant_is_left_out(
    history_url: str,
) -> None:
    from sparkwatch.plan.mapping import from_progress

    migrate.upgrade(history_url)
    b_run(history_url)
    other = "b1000000-0000-4000-8000-00000000000f"
    other_run = "b1000000-0000-4000-8000-0000000000bf"
    with writer(history_url) as w:
        w.write([started(other, other_run, "beta-other", "2026-11-20T10:00:30.000Z")], ["beta"])
        left_out = w.write_plans([from_progress(other, B_RUN, ["stateStoreSave"], "forged"),
                                  from_progress(B_QUERY, B_RUN, ["stateStoreSave"], "own")],
                                 ["beta", "beta"])
    assert left_out == [0]
    with HistoryReader(history_url) as reader:
        assert reader.plans(other) == []
        assert [p.note for p in reader.plans(B_QUERY)] == ["own"]


def test_reads_filter_by_tenant(history_url: str) -> None:
    migrate.upgrade(history_url)
    b_run(history_url)
    with writer(history_url) as w:
        w.write([started(A_QUERY, A_RUN, "alpha-q", "2026-11-20T10:01:00.000Z")], ["alpha"])
    with HistoryReader(history_url) as reader:
        assert [q.query_id for q in reader.queries(tenant="alpha")] == [A_QUERY]
        assert [q.query_id for q in reader.queries(tenant="beta")] == [B_QUERY]
        assert {q.query_id for q in reader.queries()} == {A_QUERY, B_QUERY}
        assert [r.run_id for r in reader.runs(B_QUERY, tenant="beta")] == [B_RUN]
        for name in (B_QUERY, "beta-q", B_QUERY[:8]):  # by id, name and prefix: not A's
            try:
                reader.runs(name, tenant="alpha")
            except Exception as exc:  # noqa: BLE001 - the exact class is asserted below
                assert type(exc).__name__ == "UnknownQuery"
            else:
                raise AssertionError(f"tenant alpha resolved B's query by {name!r}")


def test_migration_0008_keeps_every_run_and_stall_in_the_default_tenant(
        history_url: str) -> None:
    migrate.upgrade(history_url)
    with writer(history_url) as w:
        w.write([started(B_QUERY, B_RUN, "q", "2026-11-20T10:00:00.000Z")])
    migrate.downgrade(history_url, "0007")
    with engine_for(history_url).begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO query_stalls (run_id, detected_at, query_id, name, app_name, app_id, "
            "last_event_at, threshold_seconds) VALUES (:r, :t, :q, 'q', 'a', 'app', :t, 60)"),
            {"r": B_RUN, "q": B_QUERY, "t": "2026-11-20 10:05:00"})
    runs_before = _rows(history_url, "query_runs")
    migrate.upgrade(history_url)
    runs = fetch(history_url, "query_runs")
    assert [r["run_id"] for r in runs] == [r["run_id"] for r in runs_before] == [B_RUN]
    assert runs[0]["tenant"] == "default" and runs[0]["name"] == runs_before[0]["name"]
    with engine_for(history_url).connect() as conn:
        stalls = conn.execute(sa.select(QueryStall.run_id, QueryStall.tenant)).all()
        tenants = conn.execute(sa.select(QueryRun.tenant)).scalars().all()
    assert [tuple(s) for s in stalls] == [(B_RUN, "default")] and tenants == ["default"]


def _rows(url: str, table: str) -> list[dict[str, object]]:
    with engine_for(url).connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(f"SELECT * FROM {table}")).mappings()]
