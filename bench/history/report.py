"""The history benchmark's tables and header, printed and recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import machine
from bench.history.measure import TARGET_P95_MS, Result
from bench.history.population import Loaded
from bench.tables import table

Key = tuple[str, str, str, str]


def key(result: Result) -> Key:
    c = result.case
    return c.group, c.name, c.range, c.selection


def results_table(results: list[Result], before: dict[Key, float] | None) -> str:
    header = ["what", "query", "range", "selection", "n", "p50 ms", "p95 ms", "p99 ms",
              "max ms", "rows"]
    if before is not None:
        header += ["p95 before", "p95 change"]
    rows = []
    for r in results:
        p95 = r.p(95)
        flag = " **over**" if r.over_target else ""
        row: list[Any] = [r.case.group, r.case.name, r.case.range, r.case.selection,
                          len(r.samples_ms), r.p(50),
                          None if p95 is None else f"{_ms(p95)}{flag}", r.p(99), r.max_ms,
                          r.error or r.rows_text()]
        if before is not None:
            old = before.get(key(r))
            row += [old, _change(old, p95)]
        rows.append(row)
    return table(header, rows)


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _change(old: float | None, new: float | None) -> str:
    if old is None or new is None or new == 0:
        return "–"
    return f"{old / new:.1f}× faster" if old >= new else f"{new / old:.1f}× slower"


def verdict(results: list[Result]) -> str:
    over = [r for r in results if r.over_target]
    failed = [r for r in results if r.error]
    lines = [f"{len(results) - len(over) - len(failed)} of {len(results)} reads have p95 under "
             f"{TARGET_P95_MS:.0f} ms"]
    lines += [f"over: {r.case.group} `{r.case.name}` {r.case.range} {r.case.selection}: "
              f"p95 {_ms(r.p(95) or 0)} ms" for r in over]
    lines += [f"failed: {r.case.group} `{r.case.name}`: {r.error}" for r in failed]
    return "\n".join(f"- {line}" for line in lines)


def population_text(loaded: Loaded) -> str:
    p, counts = loaded.population, loaded.counts
    how = "reused" if loaded.reused else "built"
    return (
        f"- population ({how}; built in {loaded.built_seconds / 60:.0f} min): {p.queries:,} "
        f"queries × {p.batches_per_query:,} batches = {counts['batches']:,} `batches` rows "
        f"ending {loaded.end:%Y-%m-%d %H:%M} UTC (ranges end there); "
        + ", ".join(f"`{t}` {n:,}" for t, n in counts.items() if t != "batches")
        + f"; database {loaded.size_bytes / 2**30:.1f} GiB"
    )


def header(argv: list[str], loaded: Loaded, server: dict[str, str], reps: int,
           warmup: int) -> str:
    m = machine.describe()
    settings = ", ".join(f"{k} {v}" for k, v in server.items() if k != "version")
    return "\n".join([
        *machine.provenance(argv, m, f", Python {m['python']}"),
        f"- {server['version']} on the same machine ({settings})",
        population_text(loaded),
        f"- each read: {warmup} warm-up run per parameter variant (warm cache), then up to "
        f"{reps} timed (n: fewer for slow reads, at least 3) rotating over the variants; wall "
        "time in the client: query, transfer, decoding; HTTP: also FastAPI and JSON",
    ])


def load_before(path: Path) -> dict[Key, float]:
    data = json.loads(path.read_text())
    return {tuple(r["key"]): r["p95"] for r in data["results"] if r["p95"] is not None}  # type: ignore[misc]


def to_json(results: list[Result]) -> dict[str, Any]:
    return {"results": [
        {"key": list(key(r)), "p50": r.p(50), "p95": r.p(95), "p99": r.p(99), "max": r.max_ms,
         "rows": r.rows, "error": r.error, "samples_ms": r.samples_ms}
        for r in results
    ]}
