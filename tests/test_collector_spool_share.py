"""One tenant's backlog in the spool, on a real collector and PostgreSQL whose history the test
holds back (a lock on ``query_runs``, as a long migration would): the tenant fills its share of
the spool and gets 503 naming that share, never the spool's directory or what the others hold,
while another tenant's pushes are still accepted; the count survives a crash and restart, and
goes down as the history drains, after which every accepted event is in the history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import wait_for
from tests.tenants_support import (
    A_APP,
    A_READ,
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
from tests.test_collector_support import TOKEN, Collector, module_database, running, samples

pytestmark = pytest.mark.postgres

BOUND = 200_000
"""The spool's bound: a tenant's share is half of it (three tenants configured)."""
PUSH = 5
"""Progress events per push (about 1.5 KB each, encoded)."""




def progress(app: dict[str, str], ids: dict[str, str], n: int = PUSH) -> list[dict[str, Any]]:
    return [event_of("progress", app, ids["query_id"], ids["run_id"]) for _ in range(n)]


def push_until_refused(c: Collector, app: dict[str, str], ids: dict[str, str],
                       token: str) -> tuple[int, httpx.Response]:
    """Push until the collector refuses, PUSH events at a time, then one at a time (the room
    left filled to the last event): the events accepted meanwhile, and the last refusal."""
    count = 0
    for size in (PUSH, 1):
        for _ in range(BOUND // 1000):  # far more pushes than the whole spool holds
            response = c.post(progress(app, ids, size), token=token)
            if response.status_code != 200:
                break
            assert response.json()["accepted"] == size, response.text
            count += size
        else:
            raise AssertionError(f"{count} events accepted, never refused: no bound")
    return count, response


def pending(c: Collector) -> int:
    return int(c.get("/readyz").json()["spool"]["pending_bytes"])


def spool_by_tenant(c: Collector) -> dict[str, float]:
    return {labels["tenant"]: value for labels, value in samples(
        c.metrics(SCRAPE_TOKEN), "sparkwatch_collector_spool_tenant_bytes")}


def assert_share_full(c: Collector, response: httpx.Response) -> None:
    """503 with Retry-After naming the tenant's share; neither where the spool is nor the bytes
    every tenant holds."""
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"].isdigit()
    detail = response.json()["detail"]
    assert "this tenant's share of the spool is full" in detail, detail
    assert f"share of {BOUND // 2} bytes" in detail, detail
    assert str(c.spool_dir) not in detail and "spool/" not in detail, detail
    assert str(pending(c)) not in detail, detail


def accepted(c: Collector, app: dict[str, str], ids: dict[str, str], token: str,
             n: int = 1) -> None:
    """``n`` progress events pushed and every one accepted."""
    response = c.post(progress(app, ids, n), token=token)
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == n, response.text


def test_one_tenants_backlog_fills_its_share_of_the_spool_and_another_tenant_is_still_accepted(
    pg_admin_url: str, tmp_path: Path,
) -> None:
    a, b = fresh(), fresh()
    with tenant_collector(pg_admin_url, tmp_path, "--spool-max-bytes", str(BOUND),
                          "--no-spool-fsync") as c:
        # Their ids known to the history first: no owner lookup waits on the lock below.
        accepted_all(c, [event_of("started", A_APP, a["query_id"], a["run_id"])], A_TOKEN)
        accepted_all(c, [event_of("started", B_APP, b["query_id"], b["run_id"])], B_TOKEN)
        drained(c)
        with history_held(c.history_url):
            accepted(c, B_APP, b, B_TOKEN)  # B's bytes pending too: A must not see them
            b_pending = pending(c)
            a_accepted, refused = push_until_refused(c, A_APP, a, A_TOKEN)
            a_pending = pending(c) - b_pending
            for _ in range(3):  # A's backlog leaves B room, for more than A's last event too
                accepted(c, B_APP, b, B_TOKEN, 3)
            assert_share_full(c, refused)
            assert BOUND // 2 - 2000 < a_pending <= BOUND // 2, "A holds its share, no more"
            # Which tenant's backlog fills the spool, on /metrics.
            assert spool_by_tenant(c) == {"alpha": a_pending, "beta": pending(c) - a_pending}

            # A crash and a restart: the spool's pending records are counted again by tenant.
            c.kill()
            c.start()
            assert_share_full(c, c.post(progress(A_APP, a, 1), token=A_TOKEN))
            accepted(c, B_APP, b, B_TOKEN)

        drained(c)  # the history back: A's share is given back as its records are written
        assert spool_by_tenant(c) == {}
        accepted(c, A_APP, a, A_TOKEN)
        a_accepted += 1
        drained(c)
        wait_for(lambda: len(c.get(f"/api/v1/queries/{a['query_id']}/progress", A_READ,
                                   limit=1000).json()) == a_accepted, 30,
                 "every event A had acknowledged in its history")


def test_a_single_tenant_may_fill_the_whole_spool_and_is_told_it_is_full(
    pg_admin_url: str, tmp_path: Path,
) -> None:
    """No tenants configured (every token the ``default`` tenant's): its share is the spool."""
    ids = fresh()
    app = {"name": "orders-etl", "id": "app-single-0001", "spark_version": "4.3.0"}
    with module_database(pg_admin_url) as url, running(Collector(
            url, tmp_path / "spool", "--spool-max-bytes", str(BOUND),
            "--no-spool-fsync")) as c:
        accepted_all(c, [event_of("started", app, ids["query_id"], ids["run_id"])], TOKEN)
        drained(c)
        with history_held(url):
            _, refused = push_until_refused(c, app, ids, TOKEN)
            assert refused.status_code == 503, refused.text
            assert refused.headers["Retry-After"].isdigit()
            detail = refused.json()["detail"]
            assert "the spool is full" in detail and "share" not in detail, detail
            assert str(c.spool_dir) not in detail, detail
            assert pending(c) > BOUND - 2 * PUSH * 2000, "the whole spool is the tenant's"
