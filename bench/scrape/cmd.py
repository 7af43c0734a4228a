"""``python -m bench scrape``: the collector's /metrics vs a Pushgateway serving the same series."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import ROOT, machine
from bench.procs import ProcessFailed
from bench.record import write_block
from bench.scrape import peer as scrape_peer
from bench.scrape import procs as scrape_procs
from bench.scrape import profiles as scrape_profiles
from bench.scrape import render as scrape_render
from bench.scrape import report
from bench.scrape.fleet import AppFleet, spread
from bench.scrape.load import LoadFailed, push_fleet
from bench.scrape.measure import Census, alternate, client, wait_for_queries
from sparkwatch.collector.config import CollectorSettings
from sparkwatch.metrics.profiles import PROFILES, select

DOC = ROOT / "docs" / "benchmarks.md"
SHOW_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Options:
    queries: list[int]
    per_app: int
    batches: int
    push_batch: int
    scrapes: int
    warmup: int
    history_url: str
    pushgateway: str
    check_pushes: bool
    renders: int
    render_max_queries: int
    server_profile: str
    profiles_only: bool
    record: bool
    json_out: Path | None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--queries", default="1000,10000",
                   help="fleet sizes, comma-separated (4 state operators per query)")
    p.add_argument("--queries-per-app", type=int, default=100,
                   help="queries per app: a large fleet is many apps (default 100)")
    p.add_argument("--batches", type=int, default=3,
                   help="progress events per query, so counters and histograms have values")
    p.add_argument("--push-batch", type=int, default=500,
                   help="events per ingest request (the push sink's default batch)")
    p.add_argument("--scrapes", type=int, default=10,
                   help="timed scrapes per server and encoding (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed scrapes first (default 1)")
    p.add_argument("--history-url", default="off",
                   help="the collector's history (default off: /metrics alone is measured)")
    p.add_argument("--pushgateway", default=scrape_procs.PUSHGATEWAY,
                   help="Pushgateway binary")
    p.add_argument("--check-pushes", action="store_true",
                   help="keep the Pushgateway's push-time consistency check (slow to load: it "
                   "gathers everything it holds on every push)")
    p.add_argument("--renders", type=int, default=3,
                   help="in-process renders of the same exposition by generate_latest (before) "
                   "and sparkwatch's renderer (now), each; 0 skips (default 3)")
    p.add_argument("--render-max-queries", type=int, default=1000,
                   help="skip the in-process comparison above this size (generate_latest "
                   "takes about a minute and GBs at 10,000 queries)")
    p.add_argument("--server-profile", choices=list(PROFILES), default="full",
                   help="metric profile of the collector and of what is pushed to the "
                   "Pushgateway (default full: the whole catalogue); the in-process profile "
                   "comparison renders every profile whatever this says")
    p.add_argument("--profiles-only", action="store_true",
                   help="only the in-process metric profile comparison (no servers; recorded "
                   "in its own block)")
    p.add_argument("--record", action="store_true", help=f"write the results into {DOC}")
    p.add_argument("--json", dest="json_out", type=Path, help="also write raw results here")


def options(ns: argparse.Namespace) -> Options:
    return Options(
        queries=[int(q) for q in ns.queries.split(",")], per_app=ns.queries_per_app,
        batches=ns.batches, push_batch=ns.push_batch, scrapes=ns.scrapes, warmup=ns.warmup,
        history_url=ns.history_url, pushgateway=ns.pushgateway, check_pushes=ns.check_pushes,
        renders=ns.renders, render_max_queries=ns.render_max_queries,
        server_profile=ns.server_profile, profiles_only=ns.profiles_only, record=ns.record,
        json_out=ns.json_out,
    )


def run_size(opts: Options, queries: int, workdir: Path) -> dict[str, Any]:
    """Load both servers with the same ``queries``-query fleet, then scrape them in turns."""
    apps = spread(queries, opts.per_app)
    token = secrets.token_urlsafe(24)
    defaults = CollectorSettings()
    spec = scrape_procs.CollectorSpec(
        workdir, token, max_apps=max(defaults.max_apps, len(apps)),
        max_queries_per_app=max(defaults.max_queries_per_app, opts.per_app),
        max_queries=max(defaults.max_queries, queries),
        history_url=opts.history_url, metrics_profile=opts.server_profile)
    with (scrape_procs.collector(spec) as sw, client() as http,
          scrape_procs.pushgateway(workdir, opts.pushgateway, opts.check_pushes) as pg):
        try:
            sides = _measure(opts, apps, token, http, sw, pg)
        except httpx.HTTPError:
            sw.check()  # a server that died says so, with its log
            pg.check()
            raise
    rendered = profiles = None
    if opts.renders and queries <= opts.render_max_queries:
        rendered = asdict(scrape_render.compare(apps, opts.batches, opts.renders,
                                                select(opts.server_profile)))
        profiles = scrape_profiles.compare(apps, opts.batches, opts.renders)
    return {"queries": queries, "apps": len(apps), "per_app": opts.per_app,
            "batches": opts.batches, "events": sides["sparkwatch"]["load"]["events"],
            "scrapes": opts.scrapes, "warmup": opts.warmup, "loadavg_1m": os.getloadavg()[0],
            "server_profile": opts.server_profile, **sides, "render": rendered,
            "profiles": profiles}


def _measure(opts: Options, apps: list[AppFleet], token: str, http: httpx.Client,
             sw: scrape_procs.Server, pg: scrape_procs.Server) -> dict[str, dict[str, Any]]:
    queries = sum(app.fleet.queries for app in apps)
    sw_side: dict[str, Any] = {
        "load": asdict(push_fleet(sw.url, token, apps, opts.batches, opts.push_batch))}
    body = wait_for_queries(http, sw.url + "/metrics", queries, SHOW_TIMEOUT_S)
    sw_side["census"], sw_side["memory_loaded"] = asdict(Census.of(body)), sw.memory()
    pushed = scrape_peer.push_fleet(pg.url, apps, opts.batches, select(opts.server_profile))
    pg_side: dict[str, Any] = {"push": asdict(pushed)}
    body = wait_for_queries(http, pg.url + "/metrics", queries, SHOW_TIMEOUT_S)
    pg_side["census"], pg_side["memory_loaded"] = asdict(Census.of(body)), pg.memory()
    del body
    scraped = alternate(http, {"sparkwatch": sw.url + "/metrics",
                               "pushgateway": pg.url + "/metrics"}, opts.scrapes, opts.warmup)
    for side, server, name in ((sw_side, sw, "sparkwatch"), (pg_side, pg, "pushgateway")):
        side["memory_scraped"] = server.memory()
        side["scrapes"] = {e: asdict(s) for e, s in scraped[name].items()}
    return {"sparkwatch": sw_side, "pushgateway": pg_side}


def header(results: list[dict[str, Any]], argv: list[str], opts: Options) -> str:
    m = machine.describe()
    loads = [r["loadavg_1m"] for r in results]
    history = "off" if opts.history_url == "off" else "on"
    return "\n".join([
        *machine.provenance(argv, m),
        f"- Python {m['python']}, {_pushgateway_version(opts.pushgateway)}; collector: one "
        f"uvicorn process, history {history}, metric profile {opts.server_profile}; "
        "Pushgateway in memory, push-time consistency "
        f"check {'on' if opts.check_pushes else 'off'}",
        f"- other load on the machine: 1-min load average {min(loads):.1f}–{max(loads):.1f} "
        "at the end of each size (other processes included)",
    ])


def _pushgateway_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "Pushgateway (version unknown)"
    first = (out.stdout or out.stderr).strip().splitlines()
    return first[0].replace("pushgateway, version", "Pushgateway").split(" (")[0] if first \
        else "Pushgateway"


def profiles_main(opts: Options, argv: list[str]) -> int:
    """``--profiles-only``: the default and full profiles side by side, in this process."""
    results = []
    for queries in opts.queries:
        print(f"[bench] scrape profiles: {queries:,} queries × 4 operators", file=sys.stderr)
        profiles = scrape_profiles.compare(spread(queries, opts.per_app), opts.batches,
                                           max(opts.renders, 1))
        results.append({"queries": queries, "profiles": profiles,
                        "loadavg_1m": os.getloadavg()[0]})
    m = machine.describe()
    loads = ", ".join(f"{r['loadavg_1m']:.1f}" for r in results)
    body = "\n".join([
        *machine.provenance(argv, m, f", Python {m['python']}"),
        f"- 1-min load average at the end of each size: {loads} (other processes included)",
    ]) + "\n\n" + report.render_profiles(results)
    return publish(opts, results, body, "scrape-profiles", "Metric profiles side by side")


def publish(opts: Options, results: list[dict[str, Any]], body: str, block: str,
            title: str) -> int:
    """Print ``body``; write the raw results to ``--json`` and ``body`` to its ``--record``
    block."""
    print(body)
    if opts.json_out:
        opts.json_out.write_text(json.dumps(results, indent=1))
    if opts.record:
        write_block(DOC, block, title, body)
        print("[bench] recorded", file=sys.stderr)
    return 0


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    opts = options(ns)
    if opts.profiles_only:
        return profiles_main(opts, argv)
    results = []
    try:
        for queries in opts.queries:
            print(f"[bench] scrape: {queries:,} queries × 4 operators", file=sys.stderr)
            with tempfile.TemporaryDirectory(prefix="sparkwatch-bench-scrape-") as tmp:
                results.append(run_size(opts, queries, Path(tmp)))
    except (OSError, httpx.HTTPError, ProcessFailed, LoadFailed,
            scrape_peer.PushFailed, scrape_render.RenderMismatch, TimeoutError) as exc:
        print(f"[bench] {exc}", file=sys.stderr)
        return 1
    body = header(results, argv, opts) + "\n\n" + report.render(results)
    return publish(opts, results, body, "scrape", "Scrape: /metrics vs Pushgateway")
