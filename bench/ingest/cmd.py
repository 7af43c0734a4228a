"""``python -m bench ingest``: progress events/s accepted and written by the collector (PostgreSQL,
SQLite) vs Pushgateway receiving the same series, and vs the raw database floor."""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bench import ROOT, machine
from bench.fleet import Fleet, wire_size
from bench.ingest import profile as ingest_profile
from bench.ingest import pushgw as ingest_pushgw
from bench.ingest import report
from bench.ingest.bodies import collector_lanes, lane_of
from bench.ingest.db import DEFAULT_PG_ADMIN_URL, check_pg, conninfo
from bench.ingest.push import Request
from bench.ingest.runs import Expected, Run, run_collector, run_floor, run_pushgateway
from bench.procs import ProcessFailed
from bench.record import write_block
from sparkwatch.collector.config import CollectorSettings
from sparkwatch.settings import ListenerSettings

DOC = ROOT / "docs" / "benchmarks.md"
PATHS = ("postgresql", "sqlite", "pushgateway", "floor")


@dataclass(frozen=True, slots=True)
class Options:
    events: int
    queries: int
    provider: str
    batch: int
    clients: int
    paths: tuple[str, ...]
    pg_admin_url: str
    pushgateway_events: int
    pushgateway_seconds: float
    per_tx: int
    drain_timeout: float
    profile: Path | None
    record: bool
    json_out: Path | None
    collector_python: str | None = None
    collector_label: str = ""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes (CI smoke): 50 queries, 400 events, short gateway window")
    p.add_argument("--events", type=int, help="progress events pushed (default 100000)")
    p.add_argument("--queries", type=int, help="queries in the fleet (default 1000)")
    p.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb",
                   help="state store provider of the custom metrics")
    p.add_argument("--batch", type=int, default=ListenerSettings().push_batch_size,
                   help="events per request (default: the push sink's push.batchSize)")
    p.add_argument("--clients", type=int, default=4, help="concurrent HTTP clients")
    p.add_argument("--paths", default=",".join(PATHS),
                   help=f"comma-separated subset of {','.join(PATHS)}")
    p.add_argument("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL,
                   help="PostgreSQL where fresh databases are created and dropped")
    p.add_argument("--pushgateway-events", type=int,
                   help="events pre-rendered for the gateway's timed window (default 3000)")
    p.add_argument("--pushgateway-seconds", type=float,
                   help="longest timed window per gateway configuration (default 30)")
    p.add_argument("--per-tx", type=int, default=CollectorSettings().write_batch_size,
                   help="events per transaction of the floor (default: the collector's "
                   "--write-batch-size)")
    p.add_argument("--drain-timeout", type=float, default=900.0,
                   help="longest wait for the history to hold every event")
    p.add_argument("--profile", type=Path, metavar="DIR",
                   help="run py-spy on the collector during the PostgreSQL run; raw stacks "
                   "and a per-thread summary go to DIR (figures of that run are perturbed)")
    p.add_argument("--collector-python", metavar="PATH",
                   help="run the collector with this interpreter instead (e.g. a virtualenv "
                   "with an older sparkwatch installed, for before/after figures)")
    p.add_argument("--collector-label", default="",
                   help="appended to the collector rows' names, e.g. ' (before, ecaa70b)'")
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")
    p.add_argument("--json", dest="json_out", type=Path, help="also write raw results here")


def options(ns: argparse.Namespace) -> Options:
    paths = tuple(p.strip() for p in ns.paths.split(",") if p.strip())
    unknown = set(paths) - set(PATHS)
    if unknown:
        raise SystemExit(f"--paths: unknown {sorted(unknown)}; choose from {PATHS}")
    return Options(
        events=ns.events or (400 if ns.quick else 100_000),
        queries=ns.queries or (50 if ns.quick else 1_000),
        provider=ns.provider, batch=ns.batch, clients=ns.clients, paths=paths,
        pg_admin_url=ns.pg_admin_url,
        pushgateway_events=ns.pushgateway_events or (100 if ns.quick else 3_000),
        pushgateway_seconds=ns.pushgateway_seconds or (5.0 if ns.quick else 30.0),
        per_tx=ns.per_tx, drain_timeout=ns.drain_timeout, profile=ns.profile,
        record=ns.record, json_out=ns.json_out,
        collector_python=ns.collector_python, collector_label=ns.collector_label,
    )


def log(message: str) -> None:
    print(f"[bench ingest {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing(opts: Options) -> list[str]:
    """What the selected paths need and this machine lacks."""
    needs_pg = "postgresql" in opts.paths or "floor" in opts.paths
    reasons = [check_pg(opts.pg_admin_url) if needs_pg else None,
               ingest_pushgw.available() if "pushgateway" in opts.paths else None,
               ingest_profile.available() if opts.profile else None]
    return [r for r in reasons if r]


def gateway_lanes(fleet: Fleet, start: int, count: int, clients: int) -> list[list[Request]]:
    lanes: list[list[Request]] = [[] for _ in range(clients)]
    for i, request in enumerate(ingest_pushgw.render_pushes(fleet, start, count), start):
        lanes[lane_of(fleet, i, clients)].append(request)
    return lanes


def measure(opts: Options, fleet: Fleet, expected: Expected) -> list[Run]:
    runs: list[Run] = []
    backends = [b for b in ("postgresql", "sqlite") if b in opts.paths]
    if backends:
        log(f"encoding {opts.events} events in requests of {opts.batch}")
        lanes = collector_lanes(fleet, opts.events, opts.clients, opts.batch)
        for backend in backends:
            profile = None
            if opts.profile is not None and backend == "postgresql":
                opts.profile.mkdir(parents=True, exist_ok=True)
                profile = opts.profile / "collector-postgresql.raw"
            runs += run_collector(backend, opts.pg_admin_url, fleet, lanes,  # type: ignore[arg-type]
                                  expected, opts.drain_timeout, profile, log,
                                  opts.collector_python, opts.collector_label)
        del lanes
    if "pushgateway" in opts.paths:
        log(f"rendering {fleet.queries} + {opts.pushgateway_events} pushes")
        warmup = gateway_lanes(fleet, 0, fleet.queries, opts.clients)
        window = gateway_lanes(fleet, fleet.queries, opts.pushgateway_events, opts.clients)
        with tempfile.TemporaryDirectory(prefix="bench-ingest-gateway-") as tmp:
            runs += run_pushgateway(Path(tmp), warmup, window, opts.pushgateway_seconds, log)
        del warmup, window
    if "floor" in opts.paths:
        for backend in ("postgresql", "sqlite"):
            runs.append(run_floor(backend, opts.pg_admin_url, fleet,  # type: ignore[arg-type]
                                  opts.per_tx, expected, log))
    for run in runs:
        run.extra.setdefault("clients", opts.clients)
    return runs


def versions(opts: Options) -> str:
    parts = []
    if "pushgateway" in opts.paths:
        out = subprocess.run([ingest_pushgw.BINARY, "--version"], capture_output=True,
                             text=True, timeout=30)
        parts.append((out.stdout or out.stderr).splitlines()[0].strip())
    if "postgresql" in opts.paths or "floor" in opts.paths:
        import psycopg

        with psycopg.connect(conninfo(opts.pg_admin_url)) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        parts.append(f"PostgreSQL {row[0] if row else '?'} (local, default settings)")
    return "; ".join(parts)


def header(opts: Options, fleet: Fleet, argv: list[str]) -> str:
    m = machine.describe()
    return "\n".join([
        *machine.provenance(argv, m, f", Python {m['python']}; {versions(opts)}"),
        f"- events: {opts.events} progress events of {fleet.queries} queries × 4 operators "
        f"({fleet.provider} custom metrics, {wire_size(fleet):,} bytes of JSON each); "
        f"{opts.clients} clients, {opts.batch} events per gzip request; collector with spool "
        "fsync on, one uvicorn worker, jobs off",
        *(["- **profiled**: py-spy sampled the collector during the PostgreSQL run, whose "
           "figures are therefore lower than unprofiled"] if opts.profile else []),
    ])


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    # SIGTERM must unwind the finally blocks that stop the collector and the gateway.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    opts = options(ns)
    problems = missing(opts)
    if problems:
        log("cannot run: " + "; ".join(problems))
        return 2
    fleet = Fleet(queries=opts.queries, provider=opts.provider)  # type: ignore[arg-type]
    expected = Expected.of(fleet, opts.events)
    try:
        runs = measure(opts, fleet, expected)
    except ProcessFailed as exc:
        log(str(exc))
        return 1
    body = report.render(runs, expected.counts(), header(opts, fleet, argv))
    print(body)
    if opts.profile is not None and (opts.profile / "collector-postgresql.raw").exists():
        text = ingest_profile.summarize_file(opts.profile / "collector-postgresql.raw")
        (opts.profile / "summary.txt").write_text(text + "\n")
        log(f"profile summary in {opts.profile / 'summary.txt'}")
    if opts.json_out:
        opts.json_out.write_text(json.dumps([asdict(r) for r in runs], indent=1, default=str))
    if opts.record:
        # Another build's figures (before/after) get their own block beside the current ones.
        suffix = re.sub(r"[^a-z0-9]+", "-", opts.collector_label.lower()).strip("-")
        write_block(DOC, f"ingest-{suffix}" if suffix else "ingest",
                    f"Collector ingest: events/s accepted and written{opts.collector_label}", body)
        log("recorded")
    return 1 if any(r.problems for r in runs) else 0
