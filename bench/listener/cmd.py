"""``python -m bench listener``: sparkwatch's JVM receiver vs PySpark's public listener path."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import ROOT, machine
from bench.listener import report
from bench.listener.config import KINDS, RunConfig
from bench.listener.runner import RunFailed, run_all
from bench.record import write_block

DOC = ROOT / "docs" / "benchmarks.md"


@dataclass(frozen=True, slots=True)
class Options:
    queries: list[int]
    seconds: float
    timing_queries: int
    trigger_ms: int
    drain_seconds: float
    record: bool
    runs: str
    queue_capacity: int | None
    json_out: Path | None
    keep_logs: bool


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true",
                   help="a few seconds per run, 1 query (CI smoke); --queries/--seconds override")
    p.add_argument("--queries", help="concurrent queries per events run (default 1,6,12)")
    p.add_argument("--seconds", type=float, help="run window per configuration (default 30)")
    p.add_argument("--timing-queries", type=int, default=None,
                   help="queries in the side-by-side timing run (default 2; --quick 1)")
    p.add_argument("--trigger-ms", type=int, default=300, help="processing-time trigger")
    p.add_argument("--drain-seconds", type=float, default=None,
                   help="wait for Spark's listener queue to empty after stopping (default 45)")
    p.add_argument("--runs", choices=("all", "timing", "events"), default="all",
                   help="the side-by-side timing run, the per-listener events runs, or both")
    p.add_argument("--queue-capacity", type=int,
                   help="Spark's streams listener queue capacity (default: Spark's, 10000)")
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")
    p.add_argument("--json", dest="json_out", type=Path, help="also write raw results here")
    p.add_argument("--keep-logs", action="store_true", help="keep each run's Spark log")


def options(ns: argparse.Namespace) -> Options:
    queries = [int(q) for q in ns.queries.split(",")] if ns.queries else None
    return Options(
        queries=queries or ([1] if ns.quick else [1, 6, 12]),
        seconds=ns.seconds or (4.0 if ns.quick else 30.0),
        timing_queries=ns.timing_queries or (1 if ns.quick else 2),
        trigger_ms=ns.trigger_ms,
        drain_seconds=ns.drain_seconds or (10.0 if ns.quick else 45.0),
        record=ns.record, runs=ns.runs, queue_capacity=ns.queue_capacity,
        json_out=ns.json_out, keep_logs=ns.keep_logs,
    )


def plan(opts: Options) -> list[RunConfig]:
    def cfg(kind: Any, queries: int, probe: bool) -> RunConfig:
        return RunConfig(kind=kind, queries=queries, seconds=opts.seconds, result_path="",
                         workdir="", trigger_ms=opts.trigger_ms,
                         drain_seconds=opts.drain_seconds, probe_e2e=probe,
                         streams_capacity=opts.queue_capacity)

    # No probe in the side-by-side timing run: its scrapes would slow the callbacks it times.
    runs = [cfg("both", opts.timing_queries, False)] if opts.runs != "events" else []
    if opts.runs != "timing":
        # Alternate the kinds per query count so drifting machine load hits both alike; both
        # are probed alike (one event per second each).
        runs += [cfg(kind, n, True) for n in opts.queries for kind in KINDS]
    return runs


def render(timing: dict[str, Any] | None, runs: list[dict[str, Any]], opts: Options) -> str:
    parts, verdict = [], []
    if timing is not None:
        parts += [
            "**Callback time per progress event** — both listeners registered in one Spark, on "
            f"the same {timing['queries']} queries ({timing['window_s']:.0f} s window after "
            f"warm-up, trigger {opts.trigger_ms} ms):",
            report.callback_table(timing),
        ]
        verdict += report.callback_verdict(timing)
    if runs:
        parts += [
            "**Progress events received vs produced** — one Spark process per listener and query"
            f" count ({runs[0]['window_s']:.0f} s window after warm-up, then up to "
            f"{opts.drain_seconds:g} s for Spark's queue to drain; 'received' counts both):",
            report.events_table(runs),
            "**Callback → batch visible on the listener's `/metrics` and in its SQL history** "
            "(SQLite, the embedded default; HTTP scrapes until the new batch id shows and "
            "history polls every 2 ms until its row is there, for at most one event per second, "
            "in the runs above):",
            report.e2e_table(runs),
        ]
        verdict += report.drop_verdict(runs)
    return "\n\n".join([*parts, "\n".join(f"- {line}" for line in verdict)])


def header(results: list[dict[str, Any]], argv: list[str]) -> str:
    m, first = machine.describe(), results[0]
    return "\n".join([
        *machine.provenance(argv, m),
        f"- PySpark {first['pyspark']}, Python {m['python']}, {m['java']}; Spark `local[2]`, "
        f"2 shuffle partitions, UI off, streams queue capacity {first['streams_capacity']}",
        f"- other load on the machine: 1-min load average {loads(results)} over the runs "
        "(other processes included)",
    ])


def loads(results: list[dict[str, Any]]) -> str:
    values = [x for r in results for x in r["loadavg_1m"]]
    return f"{min(values):.1f}–{max(values):.1f}"


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    opts = options(ns)
    try:
        results = run_all(plan(opts), opts.keep_logs, lambda msg: print(msg, file=sys.stderr))
    except RunFailed as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 1
    timing = results[0] if results[0]["kind"] == "both" else None
    runs = [r for r in results if r["kind"] != "both"]
    body = header(results, argv) + "\n\n" + render(timing, runs, opts)
    print(body)
    if opts.json_out:
        opts.json_out.write_text(json.dumps({"timing": timing, "runs": runs}, indent=1))
    if opts.record:
        name, title = "listener", "Listener: callback cost and dropped events"
        if opts.queue_capacity is not None:
            name += f"-streams-capacity-{opts.queue_capacity}"
            title += f" (streams queue capacity {opts.queue_capacity})"
        write_block(DOC, name, title, body)
        print(f"[bench] recorded in {DOC}", file=sys.stderr)
    return 0
