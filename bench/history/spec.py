"""The shape of the benchmark's history: which queries, runs and operators, decided in Python.

The database generates the per-batch rows (:mod:`bench.history.sql`) from the small tables
written here, so the counts a population must have are computed from the same objects
(:meth:`Population.expected`) and checked after loading.

The fleet: ``queries`` streaming queries over ``queries // 40`` apps, each with ``rows //
queries`` batches at its own trigger interval (30 s to 8.5 min), ending at ``end``; so a query with
a short trigger covers the last days only and one with a long trigger the whole month, as in a
real fleet (or one ``interval_s`` for all, as in the named population ``100m``). Each query has
1-4 runs (restarts; Spark's batch id goes on across them), one state operator of four real kinds
(two for one query in eight; or ``operators`` of them each, up to four), RocksDB (one in five:
its custom metrics take four times the space of HDFS's) or HDFS.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

# Bump when the generated data changes: a stored population of another version is rebuilt.
GENERATOR_VERSION = 3
INTERVALS_S = (30, 60, 120, 240, 510)
QUERIES_PER_APP = 40
# Spread the queries' last batches over the last minutes before ``end``, like a live fleet.
END_SPREAD_S = 97
CHUNK = timedelta(hours=6)


def _uuid(text: str) -> str:
    return str(uuid.UUID(hashlib.md5(text.encode()).hexdigest()))


@dataclass(frozen=True, slots=True)
class QuerySpec:
    q: int
    query_id: str
    app_name: str
    app_id: str
    name: str | None
    interval_s: int
    runs: int
    kinds: tuple[int, ...]
    provider: str
    end_offset_s: int


@dataclass(frozen=True, slots=True)
class RunSpec:
    q: int
    ri: int
    run_id: str
    first_i: int
    last_i: int
    status: str
    failed: bool


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _kinds(q: int, operators: int | None) -> tuple[int, ...]:
    if operators is not None:
        return tuple((q + k) % 4 for k in range(operators))
    return (q % 4,) if (q // 7) % 8 else (q % 4, (q + 1) % 4)


def query_spec(q: int, queries: int, operators: int | None = None,
               interval_s: int | None = None) -> QuerySpec:
    apps = max(1, queries // QUERIES_PER_APP)
    app = q % apps
    return QuerySpec(
        q=q,
        query_id=_uuid(f"sparkwatch-bench-query-{q}"),
        app_name=f"app-{app:03d}",
        app_id=f"app-20261101000000-{app:04d}",
        name=None if q % 20 == 19 else f"app{app:03d}_q{q:05d}",
        interval_s=interval_s or INTERVALS_S[q % len(INTERVALS_S)],
        runs=1 + (q // 5) % 4,
        kinds=_kinds(q, operators),
        provider="rocksdb" if (q // 3) % 5 == 0 else "hdfs",
        end_offset_s=q % END_SPREAD_S,
    )


def run_specs(spec: QuerySpec, batches: int) -> list[RunSpec]:
    """The runs split the query's batches evenly (batch i is in run ``i * runs // batches``, as
    the population SQL computes it); every run but the last ended, the even ones failed."""
    out = []
    for ri in range(spec.runs):
        last = ri == spec.runs - 1
        status = ("terminated" if spec.q % 10 == 0 else "running") if last else (
            "failed" if ri % 2 == 0 else "terminated")
        out.append(RunSpec(
            q=spec.q, ri=ri, run_id=_uuid(f"sparkwatch-bench-run-{spec.q}-{ri}"),
            first_i=_ceil_div(ri * batches, spec.runs),
            last_i=_ceil_div((ri + 1) * batches, spec.runs) - 1,
            status=status, failed=status == "failed",
        ))
    return out


@dataclass(frozen=True, slots=True)
class Population:
    rows: int
    queries: int
    operators: int | None = None
    """State operators per query (1-4); None: one, two for one query in eight."""
    interval_s: int | None = None
    """Every query's trigger interval; None: 30 s to 8.5 min by query."""

    def __post_init__(self) -> None:
        if self.operators is not None and not 1 <= self.operators <= 4:
            raise ValueError(f"--operators ({self.operators}) must be 1 to 4")
        if self.queries < 1 or self.rows < self.queries or self.rows % self.queries:
            raise ValueError(f"--rows ({self.rows}) must be a multiple of --queries "
                             f"({self.queries})")
        if self.rows // self.queries < 4:
            raise ValueError("at least 4 batches per query (one per run)")

    @property
    def batches_per_query(self) -> int:
        return self.rows // self.queries

    def params(self) -> dict[str, Any]:
        # The fields added later only when set: populations built before them are still reused.
        fields = {k: v for k, v in asdict(self).items() if v is not None}
        return {**fields, "generator": GENERATOR_VERSION}

    def query_specs(self) -> list[QuerySpec]:
        return [query_spec(q, self.queries, self.operators, self.interval_s)
                for q in range(self.queries)]

    def run_specs(self) -> list[RunSpec]:
        return [r for s in self.query_specs() for r in run_specs(s, self.batches_per_query)]

    def span(self) -> timedelta:
        """From the first batch of the slowest query to ``end``."""
        slowest = self.interval_s or max(INTERVALS_S)
        longest = slowest * (self.batches_per_query - 1) + END_SPREAD_S
        return timedelta(seconds=longest)

    def chunks(self, end: datetime) -> list[tuple[datetime, datetime]]:
        """Time windows loaded one transaction each, oldest first; the last one ends past
        ``end`` (nothing is generated there)."""
        start, out = end - self.span() - timedelta(seconds=1), []
        while start <= end:
            out.append((start, start + CHUNK))
            start += CHUNK
        return out

    def expected(self) -> dict[str, int]:
        """Rows each table must hold once loaded."""
        specs, b = self.query_specs(), self.batches_per_query
        runs = self.run_specs()
        kinds = {s.q: len(s.kinds) for s in specs}
        return {
            "query_runs": len(runs),
            "batches": self.rows,
            "operator_batches": b * sum(kinds.values()),
            "source_batches": self.rows,
            "sink_batches": self.rows,
            "operator_plans": sum(kinds[r.q] for r in runs),
        }


# Named populations (``--population``): rows, queries, operators, interval.
NAMED = {
    # 100 million operator rows: 300 queries x 4 operators triggering every 30 s for 29 days.
    "100m": Population(rows=300 * 83_334, queries=300, operators=4, interval_s=30),
    # The same fleet and 30 days at a fifth of the trigger rate: 20.7 million operator rows, what
    # a shared 2-core machine with 77 GB free can build in about half an hour.
    "20m": Population(rows=300 * 17_280, queries=300, operators=4, interval_s=150),
}
