"""``python -m bench console``: p50/p95 of the browser console's pages (``/`` and
``/queries/<id>``) served by the driver's HTTP server over a history of 1 million operator rows,
on SQLite and on PostgreSQL (target: p95 under 200 ms)."""

from __future__ import annotations

import argparse
import os
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from bench import ROOT
from bench.console.population import Population, build, query_ids
from bench.machine import describe
from bench.record import doc_path, write_block
from bench.tables import table
from bench.timing import percentile
from sparkwatch.console.app import Console
from sparkwatch.console.history import HistoryData
from sparkwatch.listener.exporter import serve_metrics

DOC = ROOT / "docs" / "benchmarks.md"
DEFAULT_SQLITE = "/tmp/sparkwatch_bench_console.db"  # nosec B108 - a benchmark's scratch file
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/console_bench_console"
BACKENDS = ("sqlite", "postgresql")
GOAL_MS = 200.0


@dataclass(frozen=True, slots=True)
class Page:
    label: str
    path: str


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rows", type=int, default=1_000_000, help="operator rows (two per batch)")
    p.add_argument("--queries", type=int, default=100, help="queries the rows are spread over")
    p.add_argument("--interval", type=float, default=10.0, help="seconds between batches")
    p.add_argument("--sqlite", default=DEFAULT_SQLITE, help="SQLite file of the population")
    p.add_argument("--pg-url", default=DEFAULT_PG,
                   help="PostgreSQL database of the population (created when missing)")
    p.add_argument("--only", default=",".join(BACKENDS), help="sqlite, postgresql or both")
    p.add_argument("--requests", type=int, default=40, help="timed requests per page")
    p.add_argument("--rebuild", action="store_true", help="rebuild even a matching population")
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")


def _ensure_pg_database(url: str) -> None:
    parsed = sa.engine.make_url(url)
    admin = sa.create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        found = conn.execute(sa.text("select 1 from pg_database where datname = :n"),
                             {"n": parsed.database}).first()
        if not found:
            conn.execute(sa.text(f'create database "{parsed.database}"'))
    admin.dispose()


def _get(url: str) -> float:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 # nosec B310 - localhost
        body = response.read()
        assert response.status == 200 and b"</html>" in body, response.status
    return (time.perf_counter() - started) * 1000


def _pages(p: Population) -> list[tuple[Page, list[str]]]:
    ids = query_ids(p)[:10]
    return [
        (Page("/ (every query)", "/"), ["/?refresh=0"]),
        (Page("/queries/<id>, last hour", "/queries/<id>?range=1h"),
         [f"/queries/{q}?refresh=0&range=1h" for q in ids]),
        (Page("/queries/<id>, all (newest 360 points)", "/queries/<id>?range=all"),
         [f"/queries/{q}?refresh=0&range=all" for q in ids]),
        (Page("/queries/<id>, batches page 100", "/queries/<id>?page=100"),
         [f"/queries/{q}?refresh=0&range=15m&page=100" for q in ids]),
    ]


def measure(url: str, p: Population, requests: int) -> list[dict[str, Any]]:
    history = HistoryData(url)
    server = serve_metrics(CollectorRegistry(), "127.0.0.1", 0, Console(history, lambda _: []))
    base = f"http://127.0.0.1:{server.port}"
    out = []
    try:
        for page, paths in _pages(p):
            for path in paths[:3]:
                _get(base + path)  # warm-up: engine, caches
            samples = sorted(_get(base + paths[i % len(paths)]) for i in range(requests))
            out.append({"page": page.label, "n": len(samples), "p50": percentile(samples, 50),
                        "p95": percentile(samples, 95), "max": samples[-1]})
    finally:
        server.stop()
        history.close()
    return out


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    population = Population(ns.rows, ns.queries, ns.interval)
    backends = [b for b in ns.only.split(",") if b]
    rows: list[list[Any]] = []
    for backend in backends:
        if backend == "sqlite":
            url = f"sqlite:///{ns.sqlite}"
        else:
            _ensure_pg_database(ns.pg_url)
            url = ns.pg_url
        print(f"{backend}: population of {population.operator_rows:,} operator rows ...",
              flush=True)
        reused, seconds = build(url, population, ns.rebuild, print)
        print(f"{backend}: {'reused' if reused else f'built in {seconds:.0f} s'}", flush=True)
        for r in measure(url, population, ns.requests):
            rows.append([backend, r["page"], r["n"], r["p50"], r["p95"], r["max"],
                         "yes" if r["p95"] < GOAL_MS else "NO"])
    load = os.getloadavg()[0]
    result = table(["history", "page", "requests", "p50 ms", "p95 ms", "max ms",
                    f"p95 < {GOAL_MS:.0f} ms"], rows)
    print(result)
    if ns.record:
        m = describe()
        body = (f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {m['nproc']} cores "
                f"({m['cpu']}), {m['ram']} RAM, Python {m['python']}, code {m['code']}, "
                f"load average {load:.1f} at the end (the machine is shared); "
                f"`python -m bench {' '.join(argv)}`. {population.operator_rows:,} operator rows "
                f"({population.batches_per_query:,} batches x 2 operators x "
                f"{population.queries} queries, one batch every {population.interval_s:g} s), "
                "pages fetched over HTTP from the driver's server (the one serving /metrics), "
                "doctor's findings included on query pages.\n\n" + result)
        write_block(DOC, "console", "Console pages at 1 million history rows", body)
        print(f"recorded in {doc_path(DOC)}")
    return 0 if all(r[-1] == "yes" for r in rows) else 1



