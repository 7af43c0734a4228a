"""The read API as a tenant's reader meets it, on a real collector process: a history that cannot
be read is a generic 503 whose detail only the collector's log holds (once, not per request),
a query is addressed by any name the console takes (a '/' included, an over-long one refused
naming the parameter), and no answer may be kept by a cache."""

from __future__ import annotations

import shutil
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import wait_for
from tests.tenants_support import A_APP, A_READ, A_TOKEN, B_READ, accepted_all, tenant_env
from tests.test_collector_support import (
    READ_TOKEN,
    Collector,
    module_database,
    run_events,
    running,
)

SLASHED = "orders/daily"


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@pytest.fixture(scope="module")
def sqlite_collector(tmp_path_factory: Any) -> Iterator[Collector]:
    """A collector on a SQLite history holding alpha's query named ``orders/daily``."""
    workdir = tmp_path_factory.mktemp("reads")
    url = f"sqlite:///{workdir / 'history.db'}"
    with running(Collector(url, workdir / "spool", env=tenant_env())) as c:
        yield c


def _named(c: Collector, name: str) -> str:
    """Push a run of alpha's under ``name``; its query id once the history holds it."""
    query_id = str(uuid.uuid4())
    events = run_events(app=A_APP, query_id=query_id, run_id=str(uuid.uuid4()))
    for e in events:
        if "name" in e["payload"]:
            e["payload"]["name"] = name
    accepted_all(c, events, A_TOKEN)
    wait_for(lambda: c.get(f"/api/v1/queries/{query_id}/runs", A_READ).status_code == 200, 60,
             "the pushed run to reach the history")
    return query_id


def test_a_query_named_with_a_slash_is_read_by_its_name(sqlite_collector: Collector) -> None:
    query_id = _named(sqlite_collector, SLASHED)
    for part in ("runs", "state", "progress", "rollups", "plans"):
        response = sqlite_collector.get(f"/api/v1/queries/{_quoted(SLASHED)}/{part}", A_READ)
        assert response.status_code == 200, (part, response.text)
    runs = sqlite_collector.get(f"/api/v1/queries/{_quoted(SLASHED)}/runs", A_READ).json()
    assert [r["query_id"] for r in runs] == [query_id]
    assert runs[0]["name"] == SLASHED


def test_an_operator_the_query_never_had_is_a_404_for_rollups_as_for_state(
        sqlite_collector: Collector) -> None:
    """Rollups of operator 5 of a one-operator query were an empty 200, state's a 404."""
    query_id = _named(sqlite_collector, "one-operator")
    for part in ("state", "rollups"):
        response = sqlite_collector.get(f"/api/v1/queries/{query_id}/{part}", A_READ,
                                        operator=5)
        assert response.status_code == 404, (part, response.text)
        assert response.json()["detail"].startswith(
            f"query {query_id} has no state operator 5 (operators: 0 "), part
        known = sqlite_collector.get(f"/api/v1/queries/{query_id}/{part}", A_READ, operator=0)
        assert known.status_code == 200, (part, known.text)


def test_an_over_long_or_empty_query_name_is_refused_naming_the_parameter_not_echoing_it(
        sqlite_collector: Collector) -> None:
    long_name = "x" * 7000
    response = sqlite_collector.get(f"/api/v1/queries/{long_name}/runs", A_READ)
    assert response.status_code == 422, response.text[:300]
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["path", "query"]
    assert problem["msg"] == "string of 7000 characters is over the limit of 256"
    assert long_name not in response.text and len(response.text) < 500
    empty = sqlite_collector.get("/api/v1/queries//runs", A_READ)
    assert empty.status_code == 422, empty.text
    assert empty.json()["detail"][0]["loc"] == ["path", "query"]


def test_no_read_answer_may_be_kept_by_a_cache(sqlite_collector: Collector) -> None:
    answers = [
        sqlite_collector.get("/api/v1/queries", A_READ),
        sqlite_collector.get("/api/v1/stalls", A_READ),
        sqlite_collector.get("/api/v1/queries/no-such-query/runs", A_READ),
        sqlite_collector.get("/api/v1/queries", "not-a-token"),
    ]
    assert [a.status_code for a in answers] == [200, 200, 404, 401]
    assert [a.headers.get("cache-control") for a in answers] == ["no-store"] * 4


def test_a_history_not_migrated_is_a_generic_503_detailed_once_in_the_collectors_log(
        pg_admin_url: str, tmp_path: Path) -> None:
    with module_database(pg_admin_url) as url, running(Collector(
            url, tmp_path / "spool", "--no-history-migrate", env=tenant_env())) as c:
        database = url.rsplit("/", 1)[1]
        answers = [c.get("/api/v1/queries", token) for token in (A_READ, A_READ, READ_TOKEN)]
        assert [a.status_code for a in answers] == [503, 503, 503]
        for answer in answers:
            body = answer.json()
            assert body["request_id"] == answer.headers["x-request-id"]
            assert body["detail"].startswith("the history cannot be read: its database does not "
                                             "have the schema this sparkwatch reads"), body
            assert "\n" not in body["detail"]
            # Not in the request id: a random hex id can hold "5432" by chance.
            shown = answer.text.replace(body["request_id"], "")
            for secret in (database, "postgres", "127.0.0.1", "5432", "db upgrade"):
                assert secret not in shown
        log = c.log_text()
        assert log.count(f"{database} has no sparkwatch history schema") == 1, log
        assert answers[0].headers["x-request-id"] in log


def test_a_sqlite_history_not_there_is_a_generic_503_with_the_collectors_hint_logged(
        tmp_path: Path) -> None:
    # Its folder gone once the collector runs (a folder missing at start is refused then): the
    # collector cannot create the file again either.
    path = tmp_path / "gone" / "history.db"
    path.parent.mkdir()
    path.touch()
    with running(Collector(f"sqlite:///{path}", tmp_path / "spool", "--no-history-migrate",
                           env=tenant_env())) as c:
        shutil.rmtree(path.parent)
        answer = c.get("/api/v1/queries", A_READ)
        assert answer.status_code == 503, answer.text
        assert answer.json()["detail"].startswith(
            "the history cannot be read: its database cannot be reached or opened")
        assert str(tmp_path) not in answer.text and "SPARKWATCH" not in answer.text
        log = c.log_text()
        assert f"no history database at {path}" in log
        assert "--history-url" in log and "SPARKWATCH_COLLECTOR_HISTORY_URL" in log
        assert "--url or SPARKWATCH_HISTORY_URL" not in log


def test_a_run_s_whole_exception_is_read_by_its_own_route_and_only_by_its_tenant(
        sqlite_collector: Collector) -> None:
    """Runs answers carry the first 1,000 characters of an exception: the rest of a 64 KiB
    stack trace is read one run at a time, never by another tenant's reader."""
    query_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    trace = "org.apache.spark.SparkException: boom\n" + "\tat a.b.C.d(C.scala:1)\n" * 2_000
    events = run_events(app=A_APP, query_id=query_id, run_id=run_id)
    events[-1]["payload"]["exception"] = trace
    accepted_all(sqlite_collector, events, A_TOKEN)
    wait_for(lambda: sqlite_collector.get(f"/api/v1/queries/{query_id}/runs",
                                          A_READ).status_code == 200, 60,
             "the pushed run to reach the history")
    (run,) = sqlite_collector.get(f"/api/v1/queries/{query_id}/runs", A_READ).json()
    assert (len(run["exception"]), run["exception_chars"]) == (1_000, len(trace))

    whole = sqlite_collector.get(f"/api/v1/queries/{query_id}/runs/{run_id}/exception", A_READ)
    assert whole.status_code == 200, whole.text
    assert whole.json() == {"query_id": query_id, "run_id": run_id, "exception": trace}

    other = sqlite_collector.get(f"/api/v1/queries/{query_id}/runs/{run_id}/exception", B_READ)
    assert other.status_code == 404, other.text
    assert trace[:40] not in other.text
    unknown = sqlite_collector.get(f"/api/v1/queries/{query_id}/runs/no-such-run/exception",
                                   A_READ)
    assert unknown.status_code == 404
    assert unknown.json()["detail"] == (f"query {query_id!r} has no run 'no-such-run' that ended "
                                        "with an exception")
    too_long = sqlite_collector.get(f"/api/v1/queries/{query_id}/runs/{'r' * 129}/exception",
                                    A_READ)
    assert too_long.status_code == 422 and "r" * 129 not in too_long.text
    assert too_long.json()["detail"][0]["loc"] == ["path", "run_id"]


@pytest.mark.postgres
def test_a_run_id_with_a_nul_is_a_404_on_postgresql_not_an_unreachable_history(
        pg_admin_url: str, tmp_path: Path) -> None:
    """PostgreSQL refuses NUL in text: the read failed as "its database cannot be reached"
    (503), and the collector logged a false outage for each such request."""
    with module_database(pg_admin_url) as url, running(Collector(
            url, tmp_path / "spool", env=tenant_env())) as c:
        query_id = _named(c, "nul-reader")
        for run_id in ("%00", "a%00b"):
            answer = c.get(f"/api/v1/queries/{query_id}/runs/{run_id}/exception", A_READ)
            assert answer.status_code == 404, answer.text
            assert answer.json()["detail"] == "no run has a NUL character in its id"
        assert "cannot be reached" not in c.log_text()
