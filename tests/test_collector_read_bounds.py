"""History reads are bounded: one tenant's slow reads hold up neither the probes, nor /metrics,
nor another tenant's ingest; a tenant past its share of the read slots, or a read past its
statement or lock timeout, gets 503 with Retry-After and a request id (it was 27 s waits and a
bare 500); an error no handler caught still answers with the request id and security headers.

The reads are slowed by a lock the test holds on ``query_stalls`` (a stand-in for a slow
statement), in a transaction it keeps open while it checks the rest.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from tests.support import wait_for
from tests.tenants_support import (
    A_READ,
    B_READ,
    B_TOKEN,
    SCRAPE_TOKEN,
    beta_running_run,
    fresh,
    tenant_env,
)
from tests.test_collector_support import READ_TOKEN, Collector, database_collector

pytestmark = pytest.mark.timeout(60)

PROMPT = 2.0
"""What a probe, an ingest or a refused read must answer within while reads are blocked."""


def _scalar(url: str, sql: str) -> Any:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(sql)).scalar_one()
    finally:
        engine.dispose()


@contextmanager
def locked_stalls(url: str) -> Iterator[sa.Connection]:
    """``query_stalls`` locked against every read until the block ends (the transaction open),
    once the history's writer has migrated the database."""
    wait_for(lambda: _scalar(url, "select to_regclass('query_stalls') is not null"), 30,
             "the history migrated")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tx = conn.begin()
            conn.execute(sa.text("LOCK TABLE query_stalls IN ACCESS EXCLUSIVE MODE"))
            try:
                yield conn
            finally:
                tx.rollback()
    finally:
        engine.dispose()


READ_OF_STALLS = "SELECT query_stalls.run_id, query_stalls.detected_at, query_stalls.query_id%"
"""The statement of /api/v1/stalls (the stall job's select the tenant column too)."""


def waiting_on_locks(url: str) -> int:
    """The reads of /api/v1/stalls waiting for the lock (not the collector's jobs)."""
    return int(_scalar(url, "select count(*) from pg_stat_activity where datname = "
                            "current_database() and wait_event_type = 'Lock' and query "
                            f"like '{READ_OF_STALLS}'"))


def timed(call: Any, *args: Any, **kwargs: Any) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    response = call(*args, **kwargs)
    return response, time.monotonic() - start


def get(c: Collector, path: str, token: str | None = None,
        timeout: float = 30) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(c.url + path, headers=headers, timeout=timeout)


def assert_503(response: httpx.Response, says: str) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert says in body["detail"], body
    assert body["request_id"] and body["request_id"] == response.headers["x-request-id"]
    assert int(response.headers["retry-after"]) > 0
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.fixture
def collector(pg_admin_url: str, tmp_path: Path) -> Iterator[Collector]:
    # Four read slots, two per scope (alpha, beta and the admin read); locks waited for 20 s:
    # longer than the test, so the held-up reads stay held up until the lock is released.
    with database_collector(pg_admin_url, tmp_path / "spool", "--read-concurrency", "4",
                            "--read-lock-timeout-seconds", "20", env=tenant_env()) as c:
        yield c


def test_slow_reads_of_one_tenant_hold_up_no_probe_ingest_or_other_tenant(
        collector: Collector) -> None:
    c = collector
    # More reads than the server's thread pool has threads (40): they took every one of them.
    many = 45
    with ThreadPoolExecutor(many + 2) as pool, locked_stalls(c.history_url):
        a_reads: list[Future[httpx.Response]] = [
            pool.submit(get, c, "/api/v1/stalls", A_READ) for _ in range(many)]
        # A's share (2 of 4) of reads wait on the lock; the rest of A's are refused.
        wait_for(lambda: waiting_on_locks(c.history_url) >= 2, 10, "A's reads held up")
        # Past its share, A's reads wait briefly and are refused 503 naming its share; on the
        # old code they all waited on the lock (and on the pool), holding every thread.
        wait_for(lambda: sum(f.done() for f in a_reads) >= many - 2, 10,
                 "A's reads past its share refused")
        for r in (f.result() for f in a_reads if f.done()):
            assert_503(r, "its share of read_concurrency")
        for path, token in (("/healthz", None), ("/readyz", None), ("/metrics", SCRAPE_TOKEN),
                            ("/api/v1/queries", B_READ), ("/", B_READ)):
            response, took = timed(get, c, path, token, timeout=10)
            assert response.status_code == 200, (path, response.text)
            assert took < PROMPT, f"{path} took {took:.1f}s while A's reads were held up"
        ids = fresh()
        response, took = timed(c.post, beta_running_run(ids["query_id"], ids["run_id"]),
                               token=B_TOKEN)
        assert response.status_code == 200, response.text
        assert took < PROMPT, f"B's ingest took {took:.1f}s while A's reads were held up"

        # The admin's reads take the other half: now every slot is held, and B's read waits
        # briefly, then is refused 503 naming that reads are busy (never a 500).
        admin = [pool.submit(get, c, "/api/v1/stalls", READ_TOKEN) for _ in range(2)]
        wait_for(lambda: waiting_on_locks(c.history_url) >= 4, 10, "every read slot held")
        response, took = timed(get, c, "/api/v1/stalls", B_READ, timeout=10)
        assert_503(response, "reads are busy")
        assert took < PROMPT + 2, f"B's refused read took {took:.1f}s"
        page, _ = timed(get, c, "/queries/anything", B_READ, timeout=10)
        assert page.status_code == 503 and "reads are busy" in page.text
        assert page.headers["retry-after"] and page.headers["x-request-id"]
    # Lock released: the reads held up answer.
    for f in [*a_reads, *admin]:
        assert f.result().status_code in (200, 503), f.result().text
    assert sum(f.result().status_code == 200 for f in [*a_reads, *admin]) >= 4


def test_read_past_its_timeout_is_503_with_request_id(pg_admin_url: str,
                                                      tmp_path: Path) -> None:
    with database_collector(pg_admin_url, tmp_path / "spool", "--read-timeout-seconds", "1",
                            env=tenant_env()) as c, locked_stalls(c.history_url):
        response, took = timed(get, c, "/api/v1/stalls", A_READ, timeout=15)
        assert_503(response, "the read took too long")
        assert took < 1 + PROMPT + 1, f"the read gave up after {took:.1f}s"
        # Reads never say where the history lives.
        host = sa.engine.make_url(c.history_url)
        assert str(host.database) not in response.text and "postgres" not in response.text
        # The lock waited on is released on the server: nothing of the read is left running.
        wait_for(lambda: waiting_on_locks(c.history_url) == 0, 5, "the read's lock wait ended")
        assert "timed out" in c.log_text()


def test_unhandled_error_answers_with_request_id_and_headers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Starlette's ServerErrorMiddleware sits outside the request context: an error no handler
    caught was a bare text/plain 500 without the request id or the security headers."""
    from fastapi.testclient import TestClient

    from sparkwatch.collector.api import create_app
    from sparkwatch.collector.config import CollectorSettings
    from sparkwatch.collector.routes import operations
    from sparkwatch.collector.service import build_service

    def broken(_: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(operations, "_readiness", broken)
    settings = CollectorSettings(history_url=None, no_auth=True, spool_dir=tmp_path / "spool")
    with TestClient(create_app(build_service(settings)), raise_server_exceptions=False) as client:
        response = client.get("/readyz", headers={"X-Request-Id": "req-500-test"})
    assert response.status_code == 500, response.text
    assert response.json() == {"detail": "internal error: the collector's log has its detail "
                                         "under this request id", "request_id": "req-500-test"}
    assert response.headers["x-request-id"] == "req-500-test"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "a bug" not in response.text
