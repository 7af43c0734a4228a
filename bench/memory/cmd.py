"""``python -m bench memory``: resident memory of the collector (and its history writer process)
idle, then during one request at the body limit and during N such requests at once."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import ROOT, machine
from bench.fleet import Fleet, wire_size
from bench.ingest.collector import collector
from bench.memory.run import Phase, bodies, events_per_body, run_phase, warm_up
from bench.procs import ProcessFailed
from bench.record import write_block
from bench.tables import table
from sparkwatch.collector.config import CollectorSettings

DOC = ROOT / "docs" / "benchmarks.md"
MIB = 1 << 20
BUDGET_FACTOR = 4
"""A request at the limit may take this many times the limit over idle (docs/collector.md)."""


def log(message: str) -> None:
    print(f"[bench memory {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def add_arguments(p: argparse.ArgumentParser) -> None:
    defaults = CollectorSettings()
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes (CI smoke): a 1 MiB limit, 2 concurrent requests")
    p.add_argument("--body-bytes", type=int,
                   help=f"the collector's --max-body-bytes (default {defaults.max_body_bytes})")
    p.add_argument("--inflight-bytes", type=int,
                   help="the collector's --max-inflight-body-bytes (default: its default)")
    p.add_argument("--concurrent", type=int, help="requests at once in the last phase "
                   "(default 8)")
    p.add_argument("--queries", type=int, default=1000, help="queries in the fleet")
    p.add_argument("--provider", choices=("rocksdb", "hdfs"), default="rocksdb",
                   help="state store provider of the custom metrics")
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")
    p.add_argument("--json", dest="json_out", type=Path, help="also write raw results here")


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    limit = ns.body_bytes or (MIB if ns.quick else CollectorSettings().max_body_bytes)
    concurrent = ns.concurrent or (2 if ns.quick else 8)
    fleet = Fleet(queries=50 if ns.quick else ns.queries, provider=ns.provider)
    per_body = events_per_body(fleet, limit)
    extra = ["--max-body-bytes", str(limit),
             "--max-events-per-request", str(max(per_body, CollectorSettings()
                                                 .max_events_per_request))]
    if ns.inflight_bytes:
        extra += ["--max-inflight-body-bytes", str(ns.inflight_bytes)]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
            result = measure(Path(tmp), fleet, limit, concurrent, extra)
    except ProcessFailed as exc:
        log(str(exc))
        return 1
    result.update(limit=limit, events_per_request=per_body, concurrent=concurrent)
    body = "\n".join([_header(fleet, limit, per_body, argv), "", render(result)])
    print(body)
    if ns.json_out:
        ns.json_out.write_text(json.dumps(result, indent=1))
    if ns.record:
        write_block(DOC, "memory", "Collector memory under large requests", body)
        log("recorded")
    unexpected = [p for p in result["phases"] if set(p["statuses"]) - {"200", "503"}]
    return 1 if unexpected else 0


def measure(workdir: Path, fleet: Fleet, limit: int, concurrent: int,
            extra: list[str]) -> dict[str, Any]:
    """Each phase on a collector of its own, warmed up and measured idle first: a phase's cost
    is its own, not what an earlier phase left in the allocator."""
    phases: list[Phase] = []
    start = fleet.queries  # every measured event is new (a later batch of its query)
    for number, (name, count, encoding) in enumerate((
            ("one request", 1, "identity"),
            ("one request, gzip", 1, "gzip"),
            (f"{concurrent} requests at once", concurrent, "identity"))):
        phase_dir = workdir / f"phase-{number}"
        phase_dir.mkdir()
        history = f"sqlite:///{phase_dir / 'history.db'}"
        with collector(history, phase_dir, fleet.app, fleet.queries, extra=extra) as running:
            log(f"{name}: warming up (one event of each of the {fleet.queries} queries)")
            warm_up(running, fleet)
            batch = bodies(fleet, limit, count, start, encoding)
            log(f"{name}: {count} × {batch[0].raw_bytes / MIB:.1f} MiB of JSON "
                f"({batch[0].events} events each, {encoding})")
            phases.append(run_phase(running, name, batch))
            del batch
        p = phases[-1]
        log(f"  idle {p.idle_collector_mib:.0f} MiB ({p.idle_total_mib:.0f} with the writer), "
            f"peak {p.peak_collector_mib:.0f} MiB ({p.peak_total_mib:.0f}), "
            f"answers {p.statuses}")
    return {"phases": [asdict(p) for p in phases]}


def render(result: dict[str, Any]) -> str:
    limit_mib = result["limit"] / MIB
    rows = []
    for p in result["phases"]:
        over_c = p["peak_collector_mib"] - p["idle_collector_mib"]
        over_t = p["peak_total_mib"] - p["idle_total_mib"]
        over_w = p["peak_writer_mib"] - p["idle_writer_mib"]
        rows.append((p["name"], f"{p['body_bytes'] / MIB:.1f} MiB {p['encoding']}",
                     ", ".join(f"{n}× {code}" for code, n in p["statuses"].items()),
                     f"{p['idle_collector_mib']:.0f} → {p['peak_collector_mib']:.0f}",
                     f"+{over_c:.0f}", f"{over_c / limit_mib:.1f}×",
                     f"{p['idle_total_mib']:.0f} → {p['peak_total_mib']:.0f}",
                     f"+{over_t:.0f}", f"{over_t / limit_mib:.1f}×",
                     f"{p['idle_writer_mib']:.0f} → {p['peak_writer_mib']:.0f} (+{over_w:.0f})"))
    return "\n".join([
        "Each phase runs on a collector of its own, warmed up (one event of every query, in the "
        "history) and measured idle first. Peaks sampled every 5 ms from /proc (VmRSS) from the "
        "first request until the history holds every accepted event; × = MiB over idle per MiB "
        f"of the limit ({limit_mib:.0f} MiB); the sum's peak is sampled as one, so it is less "
        "than the two peaks added. Budget (docs/collector.md): a request at the limit, "
        f"{BUDGET_FACTOR}× the limit with the history writer; requests at once, the collector "
        f"{BUDGET_FACTOR}× --max-inflight-body-bytes and the writer its write batches' working "
        "set.", "",
        table(("phase", "body", "answers", "collector idle → peak MiB", "over idle", "× limit",
               "with history writer MiB", "over idle", "× limit", "writer alone MiB"), rows),
    ])


def _header(fleet: Fleet, limit: int, per_body: int, argv: list[str]) -> str:
    m = machine.describe()
    return "\n".join([
        *machine.provenance(argv, m, f", Python {m['python']}; history SQLite (local file), "
                                     "spool fsync on"),
        f"- requests: --max-body-bytes {limit:,}; each request {per_body} progress events "
        f"({fleet.provider} custom metrics, {wire_size(fleet):,} bytes of JSON each) of "
        f"{fleet.queries} queries, all new",
    ])
