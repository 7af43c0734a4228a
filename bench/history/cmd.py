"""``python -m bench history``: p50/p95 of the history read API and the History dashboard's SQL
over a PostgreSQL history of 10 million progress rows (target: p95 under 100 ms)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa

from bench import ROOT
from bench.history import cases, grafana, population, report
from bench.history import retention as retention_timing
from bench.history.collector import collector
from bench.history.measure import Case, Result, measure_all
from bench.history.spec import NAMED, Population
from bench.procs import ProcessFailed
from bench.record import doc_path, write_block
from sparkwatch.history import migrate
from sparkwatch.history.engine import parse_url
from sparkwatch.history.reader import HistoryReader

DOC = ROOT / "docs" / "benchmarks.md"
DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/sparkwatch_bench_history"
GROUPS = ("reader", "http", "dashboard")
SERVER_SETTINGS = ("shared_buffers", "work_mem", "effective_cache_size",
                   "max_parallel_workers_per_gather", "jit")


@dataclass(frozen=True, slots=True)
class Options:
    url: str
    population: Population
    rebuild: bool
    repetitions: int
    warmup: int
    budget_s: float
    samples: int
    groups: tuple[str, ...]
    ranges: tuple[grafana.TimeRange, ...]
    record: bool
    json_out: Path | None
    before: Path | None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=DEFAULT_URL,
                   help="PostgreSQL database of the population, dropped and rebuilt when it "
                   "holds another (its name must start with sparkwatch_bench or end with _bench)")
    p.add_argument("--rows", type=int, default=10_000_000, help="batches (progress rows)")
    p.add_argument("--queries", type=int, default=2_000,
                   help="streaming queries the rows are spread over (divides --rows)")
    p.add_argument("--operators", type=int, help="state operators per query (1-4; default: "
                   "one, two for one query in eight)")
    p.add_argument("--interval", type=int, help="every query's trigger interval in seconds "
                   "(default: 30 s to 8.5 min by query)")
    p.add_argument("--population", choices=sorted(NAMED),
                   help="a named population (sets --rows, --queries, --operators, --interval): "
                   "100m = 100 million operator rows, 300 queries x 4 operators, 29 days; "
                   "20m = the same over 30 days at a 150 s trigger")
    p.add_argument("--rebuild", action="store_true", help="rebuild even a matching population")
    p.add_argument("--repetitions", type=int, default=20, help="timed runs per read")
    p.add_argument("--warmup", type=int, default=1,
                   help="untimed runs per read and parameter variant first")
    p.add_argument("--budget", type=float, default=30.0,
                   help="seconds of timed runs per read: slower reads get fewer repetitions "
                   "(at least 3)")
    p.add_argument("--samples", type=int, default=10,
                   help="queries the per-query reads rotate over")
    p.add_argument("--only", default=",".join(GROUPS),
                   help=f"comma-separated groups to measure ({', '.join(GROUPS)})")
    p.add_argument("--ranges", default=",".join(r.label for r in grafana.RANGES),
                   help="dashboard time ranges (6h, 7d, 30d)")
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")
    p.add_argument("--json", dest="json_out", type=Path, help="also write raw results here")
    p.add_argument("--before", type=Path,
                   help="--json of an earlier run: adds its p95 and the change to the table")


def options(ns: argparse.Namespace) -> Options:
    groups = tuple(g for g in ns.only.split(",") if g)
    unknown = set(groups) - set(GROUPS)
    if unknown:
        raise SystemExit(f"[bench] unknown --only group(s): {', '.join(sorted(unknown))}")
    by_label = {r.label: r for r in grafana.RANGES}
    ranges = tuple(by_label[label] for label in ns.ranges.split(",") if label)
    try:
        pop = (NAMED[ns.population] if ns.population else
               Population(rows=ns.rows, queries=ns.queries, operators=ns.operators,
                          interval_s=ns.interval))
    except ValueError as exc:
        raise SystemExit(f"[bench] {exc}") from None
    return Options(ns.url, pop, ns.rebuild, ns.repetitions, ns.warmup, ns.budget, ns.samples,
                   groups,
                   ranges, ns.record, ns.json_out, ns.before)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def upgrade_to_head(url: str) -> None:
    """A reused population built at an older schema gets the newer migrations (indexes)."""
    if migrate.current(url) == migrate.head():
        return
    log(f"[bench] upgrading the schema to {migrate.head()} (indexes on the loaded rows)")
    migrate.upgrade(url)
    engine = sa.create_engine(parse_url(url), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("ANALYZE"))
    finally:
        engine.dispose()


def server_info(conn: psycopg.Connection[Any]) -> dict[str, str]:
    with conn.cursor() as cur:
        cur.execute("SELECT version()")
        row = cur.fetchone()
        info = {"version": str(row[0]).split(" on ")[0] if row else "PostgreSQL"}
        for name in SERVER_SETTINGS:
            cur.execute(f"SHOW {name}")
            row = cur.fetchone()
            info[name] = str(row[0]) if row else "?"
    return info


def conninfo(url: str) -> str:
    return parse_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def run_cases(opts: Options, loaded: population.Loaded,
              conn: psycopg.Connection[Any]) -> list[Result]:
    picks = cases.samples(opts.url, opts.samples)
    end = loaded.end

    def progress(r: Result) -> None:
        state = r.error or f"p50 {r.p(50) or 0:.1f} ms, p95 {r.p(95) or 0:.1f} ms"
        log(f"[bench] {r.case.group} {r.case.name} {r.case.range} {r.case.selection}: {state}")

    results: list[Result] = []
    with ExitStack() as stack:
        todo: list[Case] = []
        if "reader" in opts.groups:
            reader = stack.enter_context(HistoryReader(opts.url))
            todo += cases.reader_cases(reader, picks, end)
        if "http" in opts.groups:
            base = stack.enter_context(collector(opts.url))
            client = stack.enter_context(httpx.Client(base_url=base, timeout=120))
            todo += cases.http_cases(client, picks, end)
        if "dashboard" in opts.groups:
            todo += cases.dashboard_cases(conn, grafana.load(), picks, end, opts.ranges)
        results = measure_all(todo, opts.repetitions, opts.warmup, opts.budget_s, progress)
    return results


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    opts = options(ns)
    # A TERM (timeout, kill) unwinds like Ctrl-C: the collector process is stopped in finally.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    loaded = population.ensure(opts.url, opts.population, opts.rebuild, log)
    wrong = population.missing_rows(loaded)
    if wrong:
        log(f"[bench] the population is not what was asked (expected, found): {wrong}")
        return 1
    upgrade_to_head(opts.url)
    # The dashboard's connection as docs/collector.md tells to set up Grafana's user (JIT off:
    # on the partitioned tables JIT compiling takes ten times the "Slowest batches" query).
    with psycopg.connect(conninfo(opts.url), autocommit=True, options="-c jit=off") as conn:
        server = server_info(conn)
        try:
            results = run_cases(opts, loaded, conn)
        except ProcessFailed as exc:
            log(f"[bench] {exc}")
            return 1
    before = report.load_before(opts.before) if opts.before else None
    retention = retention_timing.measure(opts.url, loaded.end)
    log(f"[bench] {retention}")
    body = "\n\n".join([
        report.header(argv, loaded, server, opts.repetitions, opts.warmup),
        report.results_table(results, before),
        report.verdict(results) + "\n" + retention,
    ])
    print(body)
    if opts.json_out:
        opts.json_out.write_text(json.dumps(report.to_json(results), indent=1))
    if opts.record:
        if ns.population:
            rows = loaded.counts["operator_batches"]
            write_block(DOC, f"history-{ns.population}",
                        f"History queries at {rows / 1e6:.1f} million operator rows "
                        "(partitioned)", body)
        else:
            write_block(DOC, "history", "History queries at 10 million progress rows", body)
        log(f"[bench] recorded in {doc_path(DOC)}")
    return 1 if any(r.error for r in results) else 0
