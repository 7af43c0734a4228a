"""``python -m bench ceiling``: what one progress event costs, stage by stage, and the cores a
target rate takes at that cost, for the collector as built and for the least any history keeping
every field could do."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict

from bench import ROOT, machine
from bench.ceiling.db import DbCost, history_write, minimal_rows, minimal_write
from bench.ceiling.stages import Stage, measure
from bench.fleet import Fleet, wire_size
from bench.ingest.db import DEFAULT_PG_ADMIN_URL, check_pg
from bench.record import write_block
from bench.tables import table
from sparkwatch.collector.config import CollectorSettings
from sparkwatch.settings import ListenerSettings

DOC = ROOT / "docs" / "benchmarks.md"


def log(message: str) -> None:
    print(f"[bench ceiling {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--events", type=int, default=20_000, help="events measured (default 20000)")
    p.add_argument("--queries", type=int, default=1_000, help="queries in the fleet")
    p.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb")
    p.add_argument("--batch", type=int, default=ListenerSettings().push_batch_size,
                   help="events per request (default: the push sink's push.batchSize)")
    p.add_argument("--per-tx", type=int, default=CollectorSettings().write_batch_size,
                   help="events per history transaction (default: --write-batch-size)")
    p.add_argument("--target", type=int, default=20_000, help="events/s to cost (default 20000)")
    p.add_argument("--pg-admin-url", default=DEFAULT_PG_ADMIN_URL)
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")
    p.add_argument("--json", dest="json_out", help="also write raw results here")


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    problem = check_pg(ns.pg_admin_url)
    if problem:
        log(f"cannot run: {problem}")
        return 2
    fleet = Fleet(queries=ns.queries, provider=ns.provider)
    log(f"stages of the collector on {ns.events} events")
    stages = measure(fleet, ns.events, ns.batch)
    log("PostgreSQL: the history writer, then one raw row per event")
    parsed = _parsed_chunks(fleet, ns.events, ns.per_tx)
    written = history_write(ns.pg_admin_url, parsed)
    del parsed
    minimal = minimal_write(ns.pg_admin_url, minimal_rows(fleet, ns.events), ns.per_tx)
    body = "\n".join([_header(fleet, ns, argv), "",
                      render(stages, written, minimal, ns.target)])
    print(body)
    if ns.json_out:
        with open(ns.json_out, "w") as f:
            json.dump({"stages": [asdict(s) for s in stages], "history": asdict(written),
                       "minimal": asdict(minimal)}, f, indent=1)
    if ns.record:
        write_block(DOC, "ingest-ceiling", "What one event costs", body)
        log("recorded")
    return 0


def _parsed_chunks(fleet: Fleet, events: int, per_tx: int) -> list[list]:
    import orjson

    from sparkwatch.collector.typedwire import read_event

    # Read as the writer reads the spool: typed (the rows are the same as the exact parser's).
    wire = [read_event(orjson.dumps(e)) for e in fleet.events(0, events)]
    return [wire[i:i + per_tx] for i in range(0, events, per_tx)]


def render(stages: list[Stage], written: DbCost, minimal: DbCost, target: int) -> str:
    def cores(us: float) -> str:
        return f"{us * target / 1e6:.2f}"

    rows = [(s.side if s.side != "floor" else "(least only)", s.name, s.code,
             f"{s.us_per_event:.1f}", cores(s.us_per_event)) for s in stages]
    rows += [("history", "write: " + written.what, "client CPU", f"{written.client_us:.1f}",
              cores(written.client_us)),
             ("database", "PostgreSQL backend for that write", "server CPU",
              f"{written.server_us:.1f}", cores(written.server_us))]
    ingest = sum(s.us_per_event for s in stages if s.side == "ingest")
    history = sum(s.us_per_event for s in stages
                  if s.side == "history" and not s.name.startswith("build the history rows"))
    built = ingest + history + written.client_us + written.server_us
    least = _least(stages) + minimal.client_us + minimal.server_us
    db = [(written.what, f"{written.rate:,.0f}", f"{written.client_us:.1f}",
           f"{written.server_us:.1f}"),
          (minimal.what, f"{minimal.rate:,.0f}", f"{minimal.client_us:.1f}",
           f"{minimal.server_us:.1f}")]
    return "\n".join([
        f"**CPU per progress event, stage by stage** (one thread; cores = µs × {target:,} / s; "
        "'build the history rows' is part of the write below it, not added again; "
        "'(least only)' is no stage of the collector, only of the least below):", "",
        table(("side", "stage", "code", "µs per event", f"cores at {target:,}/s"), rows), "",
        f"**PostgreSQL alone** ({written.events:,} events timed per row, after as many "
        "loaded first; events/s with one client on this machine):", "",
        table(("what is written", "events/s", "client µs per event", "server µs per event"),
              db), "",
        f"- the collector as built: ingest {ingest:.0f} µs + history writer "
        f"{history + written.client_us:.0f} µs + PostgreSQL {written.server_us:.0f} µs = "
        f"{built:.0f} µs of CPU per event; {target:,} events/s takes {cores(built)} cores",
        f"- ingest alone (what a 200 answer requires: inflate, decode, validate, fold into "
        f"/metrics, spool): {ingest:.0f} µs; {target:,} events/s takes {cores(ingest)} cores "
        "before anything is written to the database",
        f"- PostgreSQL alone for the history as written (7 rows per event): "
        f"{written.server_us:.0f} µs of server CPU; {target:,} events/s takes "
        f"{cores(written.server_us)} cores",
        f"- the least any collector keeping every field could do (inflate, decode JSON, one raw "
        f"row per event; no validation, no /metrics, no per-operator rows): {least:.0f} µs; "
        f"{target:,} events/s takes {cores(least)} cores",
        f"- this machine: {machine.describe()['nproc']} cores",
    ])


def _least(stages: list[Stage]) -> float:
    wanted = ("inflate the gzip request", "decode JSON")  # the floor side: no validation
    return sum(s.us_per_event for s in stages if s.side in ("ingest", "floor")
               and s.name in wanted)


def _header(fleet: Fleet, ns: argparse.Namespace, argv: list[str]) -> str:
    m = machine.describe()
    return "\n".join([
        *machine.provenance(argv, m, f", Python {m['python']}; PostgreSQL local, default settings"),
        f"- events: {ns.events} progress events of {fleet.queries} queries × 4 operators "
        f"({fleet.provider} custom metrics, {wire_size(fleet):,} bytes of JSON each), "
        f"{ns.batch} per request, {ns.per_tx} per transaction",
    ])
