"""CI smoke of ``python -m bench history``: the real code path at a tiny size on real PostgreSQL.

A fresh database gets a 20-query, 20,000-batch population; every measured read (reader methods,
the HTTP read API of a real collector process, every History dashboard panel and variable for
every range and selection) runs twice and must succeed; the population's counts must be exactly
what its spec says, and a second run must reuse it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.history import grafana as history_grafana
from bench.history import population as history_population
from bench.history.spec import Population
from sparkwatch.history import rollups
from tests.bench_support import run_bench
from tests.support import drop_database

pytestmark = [pytest.mark.postgres]

ROWS, QUERIES = 20_000, 20


@pytest.fixture
def bench_url(pg_admin_url: str) -> Iterator[str]:
    """A database name the bench accepts (it drops and rebuilds its own), dropped after."""
    name = f"sparkwatch_bench_history_smoke_{uuid.uuid4().hex[:10]}"
    url = sa.engine.make_url(pg_admin_url).set(database=name)
    yield url.render_as_string(hide_password=False)
    drop_database(pg_admin_url, name)


def test_bench_history_smoke(bench_url: str, tmp_path: Path) -> None:
    doc, raw = tmp_path / "benchmarks.md", tmp_path / "history.json"
    argv = ["history", "--url", bench_url, "--rows", str(ROWS), "--queries", str(QUERIES),
            "--samples", "4", "--repetitions", "2", "--warmup", "0", "--record", "--json",
            str(raw)]
    assert run_bench(argv, doc) == 0

    population = Population(ROWS, QUERIES)
    loaded = history_population.loaded(bench_url, population, reused=True)
    assert history_population.missing_rows(loaded) == {}
    for derived in history_population.DERIVED_TABLES:
        assert loaded.counts[derived] > 0, derived

    results = json.loads(raw.read_text())["results"]
    assert all(r["error"] is None for r in results), [r for r in results if r["error"]]
    assert all(len(r["samples_ms"]) == 2 for r in results)
    by_key = {tuple(r["key"]): r["rows"] for r in results}
    board = history_grafana.load()
    ranges, selections = len(history_grafana.RANGES), 2
    assert sum(k[0] == "dashboard" and k[2] != "–" for k in by_key) == (
        len(board.panels) * ranges * selections)
    # Every query, and the population's own counts, through each way in.
    assert by_key[("reader", "queries()", "–", "All")] == [QUERIES, QUERIES]
    assert by_key[("reader", "statuses()", "–", "All")] == [QUERIES, QUERIES]
    assert by_key[("http", "GET /api/v1/queries", "–", "All")] == [QUERIES, QUERIES]
    assert by_key[("dashboard", "variable $query", "–", "All")] == [QUERIES, QUERIES]
    assert by_key[("reader", "state(id) newest 100", "–", "one query")] == [100, 100]
    for title in ("Slowest batches", "Batch duration per hour (p95 and max)"):
        assert min(by_key[("dashboard", title, "6h", "All")]) > 0, title

    text = doc.read_text()
    assert "<!-- bench:history:begin -->" in text and "State rows gained per day" in text

    # Reused as it is: no rebuild, same counts.
    again = history_population.ensure(bench_url, population, rebuild=False, log=print)
    assert again.reused and again.counts == loaded.counts
    assert_rollups_are_the_jobs(bench_url, loaded.end)


def rollup_rows(conn: sa.Connection, table: str) -> list[tuple]:
    return [tuple(r) for r in conn.execute(sa.text(
        f"SELECT * FROM {table} WHERE resolution IN ('hour', 'day') ORDER BY 1, 2, 3, 4"))]


def assert_rollups_are_the_jobs(url: str, end: datetime) -> None:
    """The population's hour and day rollups are exactly what the product's rollups job writes
    over the same batches (recomputed in a transaction that is rolled back)."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            tables = ("query_rollups", "operator_rollups")
            built = {t: rollup_rows(conn, t) for t in tables}
            conn.execute(sa.text("DELETE FROM query_rollups; DELETE FROM operator_rollups"))
            rollups.recompute(conn, end, lookback_seconds=400 * 86400)
            for table in tables:
                assert rollup_rows(conn, table) == built[table], table
            hours = [r for r in built["query_rollups"] if r[1] == "hour"]
            assert hours and all(r[-1] is not None for r in hours)  # the p95
            conn.rollback()
    finally:
        engine.dispose()
