"""The ingest benchmark's tables and verdict lines (printed, and recorded with ``--record``)."""

from __future__ import annotations

from collections.abc import Sequence

from bench.ingest.db import TABLES
from bench.ingest.runs import Run
from bench.tables import cell, table

TARGET_PG_EVENTS_S = 20_000
TARGET_VS_PUSHGATEWAY = 3.0
TARGET_VS_FLOOR = 0.8
"""Written events/s per replica against the raw database's own floor, measured in the same run."""
PEER = "Pushgateway, consistency check off"
"""The faster Pushgateway configuration: ratios are taken against the stronger peer."""


def find(runs: Sequence[Run], prefix: str) -> Run | None:
    return next((r for r in runs if r.path.startswith(prefix)), None)


def floor_for(run: Run, runs: Sequence[Run]) -> Run | None:
    if "PostgreSQL" in run.path:
        return find(runs, "floor: PostgreSQL")
    if "SQLite" in run.path:
        return find(runs, "floor: SQLite")
    return None


def rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def times(num: float, den: float | None) -> str:
    if not den:
        return "–"
    x = num / den
    return f"{x:.1f}×" if x >= 0.1 else f"{x:.2g}×"


def _cpu(run: Run) -> str:
    if run.cpu_s is None:
        return "–"
    return f"{run.cpu_s:.1f} s ({100 * run.cpu_s / run.seconds:.0f} %)" if run.seconds else "–"


def figures_table(runs: Sequence[Run]) -> str:
    peer = find(runs, PEER)
    rows = []
    for r in runs:
        floor = floor_for(r, runs)
        rows.append([
            r.path, r.events, f"{r.seconds:.2f}", rate(r.rate),
            times(r.rate, peer.rate) if peer is not None and r is not peer else "–",
            times(r.rate, floor.rate) if floor is not None and r is not floor else "–",
            _cpu(r), "–" if r.rss_mib is None else f"{r.rss_mib:.0f}",
        ])
    return table(["path", "events", "seconds", "events/s", "× Pushgateway", "× floor",
                  "server CPU (% of a core)", "server peak RSS MiB"], rows)


def rows_table(runs: Sequence[Run], expected: dict[str, int]) -> str:
    rows = [["expected", *(expected[t] for t in TABLES)]]
    rows += [[r.path, *(r.extra["counts"].get(t) for t in TABLES)]
             for r in runs if "counts" in r.extra and not r.path.endswith("accepted")]
    return table(["rows in", *TABLES], rows)


def notes(runs: Sequence[Run]) -> list[str]:
    lines = []
    for r in runs:
        extra = r.extra
        if "client_cpu_s" in extra and r.seconds and not r.path.endswith("written"):
            lines.append(f"{r.path}: the {_clients(r)} clients used "
                         f"{100 * extra['client_cpu_s'] / r.seconds:.0f} % of a core, sending "
                         f"{extra['bytes_per_event']:,.0f} bytes of request body per event")
        if extra.get("db_backend_cpu_s") is not None and r.path.endswith("written"):
            lines.append(f"{r.path}: PostgreSQL backends serving the collector used "
                         f"{extra['db_backend_cpu_s']:.1f} s of CPU")
            budget = cpu_budget(r)
            if budget:
                lines.append(f"{r.path}: {budget}")
        if extra.get("disk_bytes") and r.events:
            lines.append(f"{r.path}: the history takes {extra['disk_bytes'] / r.events:,.0f} "
                         "bytes on disk per event (tables and indexes)")
        if extra.get("retries_503") and r.path.endswith("accepted"):
            lines.append(f"{r.path}: {extra['retries_503']} requests answered 503 (spool full) "
                         "and retried")
    return lines


def cpu_budget(run: Run) -> str | None:
    """CPU per event of the collector and of PostgreSQL over a written run, and what the target
    rate would take at that cost: the figure that says whether a miss is the code or the machine."""
    db = run.extra.get("db_backend_cpu_s")
    if run.cpu_s is None or db is None or not run.events:
        return None
    collector_us, db_us = 1e6 * run.cpu_s / run.events, 1e6 * db / run.events
    cores = TARGET_PG_EVENTS_S * (collector_us + db_us) / 1e6
    return (f"CPU per event: collector {collector_us:,.0f} µs + PostgreSQL {db_us:,.0f} µs; "
            f"{TARGET_PG_EVENTS_S:,} events/s at that cost takes {cores:.1f} cores")


def _clients(run: Run) -> str:
    return str(run.extra.get("clients", "K"))


def verdict(runs: Sequence[Run]) -> list[str]:
    lines = []
    written = find(runs, "collector → PostgreSQL, written")
    accepted = find(runs, "collector → PostgreSQL, accepted")
    if written is not None:
        met = "met" if written.rate >= TARGET_PG_EVENTS_S else "MISSED"
        lines.append(f"target ≥ {TARGET_PG_EVENTS_S:,} events/s written to PostgreSQL: "
                     f"{rate(written.rate)} events/s, {met}")
    lines += floor_ratios(runs)
    for peer_name in (PEER, "Pushgateway, defaults"):
        peer = find(runs, peer_name)
        if peer is None or not peer.rate:
            continue
        for r in (accepted, written):
            if r is None:
                continue
            x = r.rate / peer.rate
            met = "met" if x >= TARGET_VS_PUSHGATEWAY else "MISSED"
            lines.append(f"target ≥ {TARGET_VS_PUSHGATEWAY:g}× {peer_name}: {r.path} "
                         f"{cell(x)}×, {met}")
    problems = [p for r in runs for p in r.problems]
    lines.append("correctness: every event accepted and written exactly once" if not problems
                 else "correctness PROBLEMS: " + "; ".join(problems))
    return lines


def floor_ratios(runs: Sequence[Run]) -> list[str]:
    """Written/floor for each backend whose written run and floor ran in this run."""
    lines = []
    for backend in ("PostgreSQL", "SQLite"):
        # a build's label (--collector-label) follows the backend's name
        written = next((r for r in runs if r.path.startswith(f"collector → {backend}")
                        and r.path.endswith(", written")), None)
        floor = find(runs, f"floor: {backend}")
        if written is None or floor is None or not floor.rate:
            continue
        x = written.rate / floor.rate
        met = "met" if x >= TARGET_VS_FLOOR else "MISSED"
        lines.append(f"target written/floor ≥ {TARGET_VS_FLOOR:g}× on {backend}: {x:.2f}× "
                     f"({rate(written.rate)} of {rate(floor.rate)} events/s), {met}")
    return lines


def render(runs: Sequence[Run], expected: dict[str, int], intro: str) -> str:
    parts = [intro, figures_table(runs)]
    if any("counts" in r.extra for r in runs):
        parts.append(rows_table(runs, expected))
    parts.append("\n".join(f"- {line}" for line in [*notes(runs), *verdict(runs)]))
    return "\n\n".join(parts)
