"""Shared by the tenant isolation and quota tests (no tests of its own): a real collector with two
tenants, ``alpha`` (the hostile one, A) and ``beta`` (B), their tokens, and readers of everything
of one tenant (its /metrics series, its history through the read API) to compare before and
after."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support import session_holding, wait_for
from tests.test_collector_support import (
    READ_TOKEN,
    TOKEN,
    Collector,
    database_collector,
    envelope,
    fresh_ids,
    recorded,
    run_events,
)

A_TOKEN = "tenant-alpha-ingest-token"
B_TOKEN = "tenant-beta-ingest-token"
A_READ = "tenant-alpha-read-token"
B_READ = "tenant-beta-read-token"
SCRAPE_TOKEN = "tenant-test-scrape-token"
B_APP = {"name": "beta-orders", "id": "app-beta-0001", "spark_version": "4.3.0"}
A_APP = {"name": "alpha-etl", "id": "app-alpha-0001", "spark_version": "4.3.0"}


def tenant_env(tokens: dict[str, str] | None = None, **extra: str) -> dict[str, str]:
    """The collector's environment: the default tenant's token, A's, B's, and ``tokens``
    (tenant -> ingest token) of further tenants."""
    more = "".join(f",{tenant}/*={token}" for tenant, token in (tokens or {}).items())
    return {
        "SPARKWATCH_COLLECTOR_TOKENS": f"*={TOKEN},alpha/*={A_TOKEN},beta/*={B_TOKEN}{more}",
        "SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN,
        "SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS": f"alpha={A_READ},beta={B_READ}",
        "SPARKWATCH_COLLECTOR_SCRAPE_TOKEN": SCRAPE_TOKEN,
        **extra,
    }


@contextmanager
def tenant_collector(pg_admin_url: str, workdir: Path, *flags: str,
                     tokens: dict[str, str] | None = None) -> Iterator[Collector]:
    """A collector on a database of its own, with jobs quick enough to see stalls in seconds."""
    with database_collector(pg_admin_url, workdir / "spool", "--stall-min-seconds", "1",
                            "--stall-check-seconds", "1", "--rollup-interval-seconds", "1",
                            *flags, env=tenant_env(tokens)) as c:
        yield c


def tenant_series(c: Collector, tenant: str) -> list[str]:
    """Every /metrics line of ``tenant``, sorted (the scrape token reads every tenant's)."""
    text = c.metrics(SCRAPE_TOKEN)
    return sorted(line for line in text.splitlines() if f'tenant="{tenant}"' in line)


def drained(c: Collector, timeout: float = 60) -> None:
    """Wait until every accepted event is in the history (the spool is empty)."""
    wait_for(lambda: c.get("/readyz").json()["spool"]["pending_bytes"] == 0, timeout,
             "the spool to drain into the history")


def history_of(c: Collector, read_token: str) -> dict[str, Any]:
    """Everything the read API shows to ``read_token``: queries, and per query its runs,
    progress, state and rollups; the stall marks."""
    out: dict[str, Any] = {}
    queries = _ok(c.get("/api/v1/queries", read_token, limit=1000))
    out["queries"] = queries
    for q in queries:
        qid = q["query_id"]
        for part in ("runs", "progress", "state", "rollups"):
            out[f"{qid}/{part}"] = _ok(c.get(f"/api/v1/queries/{qid}/{part}", read_token,
                                             limit=1000))
    out["stalls"] = _ok(c.get("/api/v1/stalls", read_token, limit=1000))
    return out


def _ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def push(c: Collector, events: list[dict[str, Any]], token: str) -> Any:
    response = c.post(events, token=token)
    assert response.status_code in (200, 429), response.text
    return response


def accepted_all(c: Collector, events: list[dict[str, Any]], token: str) -> None:
    """Push ``events`` (in pieces of 20) and require every one accepted."""
    for start in range(0, len(events), 20):
        part = events[start:start + 20]
        response = c.post(part, token=token)
        assert response.status_code == 200, response.text
        assert response.json()["accepted"] == len(part), response.text


def beta_running_run(query_id: str, run_id: str) -> list[dict[str, Any]]:
    """B's run, started with progress but not terminated (so it can stall)."""
    return run_events(app=B_APP, query_id=query_id, run_id=run_id, terminated=False)


_BATCH_IDS = itertools.count(10_000)


def event_of(kind: str, app: dict[str, str], query_id: str, run_id: str) -> dict[str, Any]:
    """One wire event of ``kind`` (started, progress, idle, terminated) with these identities."""
    data = copy.deepcopy(recorded())
    payload = data[kind] if kind != "progress" else data["progress"][-1]
    payload = {**payload, "id": query_id, "runId": run_id}
    if kind == "progress":
        payload["batchId"] = next(_BATCH_IDS)  # a batch never seen: it would count
    return envelope(kind, payload, app)


def fresh() -> dict[str, str]:
    return fresh_ids()


@contextmanager
def history_held(url: str, table: str = "query_runs") -> Iterator[None]:
    """``table`` locked for the block: the collector's history writer cannot write. Locking
    ``batches`` alone leaves the owner lookup (``query_runs``) answering: ids are then claimed
    for sure, not provisionally (another tenant naming a provisional claim waits, 503)."""
    with session_holding(url, f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"):
        yield
