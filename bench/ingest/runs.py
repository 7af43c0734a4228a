"""One measured run per path: the collector into PostgreSQL or SQLite, the Pushgateway, the raw
database floor. Each returns its figures and the correctness problems it saw (empty when every
event was accepted and written exactly once)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.fleet import Fleet
from bench.ingest import profile as ingest_profile
from bench.ingest.bodies import lane_events
from bench.ingest.collector import Running, collector, sample
from bench.ingest.db import Counter, pg_database, sqlite_url
from bench.ingest.floor import Backend, load_postgresql, load_sqlite, prepare
from bench.ingest.push import PushResult, Request, collector_ack, push_all, pushgateway_ack
from bench.ingest.pushgw import HEADERS, pushgateway
from bench.procs import ProcessFailed, ProcStats, cpu_seconds, proc_stats, wait_until
from sparkwatch.history import migrate
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import envelope_from_dict, parse_envelope

Log = Callable[[str], None]
SCHEMA_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Expected:
    """What the history must hold after ``events`` events of ``fleet``."""

    events: int
    runs: int
    operators: int
    sources: int
    sinks: int

    @classmethod
    def of(cls, fleet: Fleet, events: int) -> Expected:
        t = fleet.template()
        return cls(events, min(fleet.queries, events), events * len(t["stateOperators"]),
                   events * len(t["sources"]), events * (t.get("sink") is not None))

    def counts(self) -> dict[str, int]:
        return {"query_runs": self.runs, "batches": self.events,
                "operator_batches": self.operators, "source_batches": self.sources,
                "sink_batches": self.sinks}


@dataclass
class Run:
    path: str
    events: int
    seconds: float
    cpu_s: float | None = None
    """CPU of the serving process (collector, gateway) over ``seconds``"""
    rss_mib: float | None = None
    """its peak resident memory"""
    extra: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


def check_counts(got: dict[str, int], expected: Expected, what: str) -> list[str]:
    return [f"{what}: {table} has {got.get(table)} rows, expected {n}"
            for table, n in expected.counts().items() if got.get(table) != n]


def check_push(push: PushResult, events: int, what: str) -> list[str]:
    problems = [f"{what}: {e}" for e in push.errors[:5]]
    if push.events != events or push.accepted != events:
        problems.append(f"{what}: {push.accepted} of {events} events accepted")
    if push.rejected or push.duplicates:
        problems.append(f"{what}: {push.rejected} rejected, {push.duplicates} duplicates")
    return problems


@contextmanager
def _history(backend: Backend, admin_url: str, workdir: Path) -> Iterator[str]:
    if backend == "postgresql":
        with pg_database(admin_url, "collector") as url:
            yield url
    else:
        yield sqlite_url(workdir / "history.db")


def _backend_cpu(counter: Counter) -> float | None:
    """CPU of the PostgreSQL backends serving the collector (all connections to its database
    but ours, which only counts rows)."""
    pids = counter.scalar("SELECT array_agg(pid) FROM pg_stat_activity WHERE datname = "
                          "current_database() AND pid <> pg_backend_pid()")
    try:
        return sum(cpu_seconds(pid) for pid in pids or [])
    except OSError:  # PostgreSQL on another host or in a container
        return None


def all_written(running: Running, counter: Counter, fleet: Fleet, clients: int,
                expected: Expected) -> Callable[[], bool]:
    """Whether the history holds every event. Cheap while it does not: first the last event of
    each client (primary-key lookups), and only once those are in, the full count (a count per
    poll would load the database being measured)."""
    lasts = [lane[-1] for lane in lane_events(fleet, expected.events, clients) if lane]
    keys = [(fleet.run_id(i % fleet.queries), i // fleet.queries) for i in lasts]

    def check() -> bool:
        if not running.alive() or not all(counter.has_batch(r, b) for r, b in keys):
            return False
        return counter.count("batches") >= expected.events

    return check


def run_collector(backend: Backend, admin_url: str, fleet: Fleet,
                  lanes: Sequence[Sequence[Request]], expected: Expected, drain_timeout: float,
                  profile: Path | None, log: Log, python: str | None = None,
                  label: str = "") -> tuple[Run, Run]:
    """The collector's accepted and written figures for one history backend (``python``,
    ``label``: another collector build, see :func:`.ingest_collector.collector`)."""
    what = f"collector → {'PostgreSQL' if backend == 'postgresql' else 'SQLite'}{label}"
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp, ExitStack() as stack:
        url = stack.enter_context(_history(backend, admin_url, Path(tmp)))
        running = stack.enter_context(collector(url, Path(tmp), fleet.app, fleet.queries,
                                                python))
        counter = stack.enter_context(Counter(url))
        # Another build migrates to its own head: wait for its schema, whatever revision.
        head = migrate.head()
        wait_until(lambda: running.alive() and (counter.revision() == head if python is None
                                                else counter.revision() is not None),
                   SCHEMA_TIMEOUT_S, "the history schema")
        log(f"{what}: pushing {expected.events} events")
        before = proc_stats(running.pid)
        with ingest_profile.recording(running.pid, profile) if profile else nullcontext():
            push = push_all(running.url, "POST", running.headers, lanes, collector_ack)
            at_push_end, backlog = proc_stats(running.pid), counter.count("batches")
            if push.accepted != expected.events:  # the history can never hold them all
                raise ProcessFailed(f"{what}: {push.accepted} of {expected.events} events "
                                    f"accepted, statuses {dict(push.statuses)}: {push.errors[:3]}")
            log(f"{what}: accepted {push.accepted} in {push.seconds:.1f} s; waiting for the "
                f"history ({backlog} written so far)")
            seen = wait_until(all_written(running, counter, fleet, len(lanes), expected),
                              drain_timeout, f"{expected.events} batches rows ({what})")
        after = proc_stats(running.pid)
        counts = counter.counts()
        db_cpu = _backend_cpu(counter) if backend == "postgresql" else None
        self_metrics = running.self_metrics()
    return _collector_runs(what, push, seen - push.started, (before, at_push_end, after),
                           counts, db_cpu, self_metrics, expected)


def _collector_runs(what: str, push: PushResult, written_s: float,
                    stats: tuple[ProcStats, ProcStats, ProcStats], counts: dict[str, int],
                    db_cpu: float | None, metrics: dict[str, float], expected: Expected
                    ) -> tuple[Run, Run]:
    before, at_push_end, after = stats
    extra = {"client_cpu_s": push.client_cpu_s, "requests": push.requests,
             "bytes_per_event": push.body_bytes / max(push.events, 1),
             "retries_503": push.retries, "statuses": dict(push.statuses), "counts": counts,
             "db_backend_cpu_s": db_cpu, "self_metrics": metrics}
    problems = check_push(push, expected.events, what)
    problems += check_counts(counts, expected, what)
    written = sample(metrics, "sparkwatch_collector_history_events_written_total")
    rejected = sum(v for k, v in metrics.items() if "events_rejected_total" in k)
    if written != expected.events or rejected:
        problems.append(f"{what}: the collector counts {written:.0f} written, "
                        f"{rejected:.0f} rejected; expected {expected.events} and 0")
    accepted = Run(f"{what}, accepted", push.accepted, push.seconds,
                   at_push_end.cpu_s - before.cpu_s, at_push_end.peak_rss_mib, extra, problems)
    written_run = Run(f"{what}, written", counts["batches"], written_s,
                      after.cpu_s - before.cpu_s, after.peak_rss_mib, extra)
    return accepted, written_run


def run_pushgateway(workdir: Path, warmup: Sequence[Sequence[Request]],
                    window: Sequence[Sequence[Request]], window_s: float, log: Log
                    ) -> list[Run]:
    """The gateway with its consistency check off, then (same groups) with the defaults."""
    runs = []
    for check in (False, True):
        name = "Pushgateway, " + ("defaults" if check else "consistency check off")
        with pushgateway(workdir, check) as gateway:
            if not check:
                log(f"{name}: filling one group per query")
                fill = push_all(gateway.url, "PUT", HEADERS, warmup, pushgateway_ack)
                if fill.errors:
                    return [Run(name, 0, 0.0, problems=[f"{name}: {e}" for e in fill.errors[:5]])]
            log(f"{name}: pushing for up to {window_s:g} s")
            before = proc_stats(gateway.pid)
            push = push_all(gateway.url, "PUT", HEADERS, window, pushgateway_ack, window_s)
            after = proc_stats(gateway.pid)
        runs.append(Run(name, push.events, push.seconds, after.cpu_s - before.cpu_s,
                        after.peak_rss_mib,
                        {"client_cpu_s": push.client_cpu_s, "statuses": dict(push.statuses),
                         "bytes_per_event": push.body_bytes / max(push.events, 1)},
                        [f"{name}: {e}" for e in push.errors[:5]]))
    return runs


def parsed_chunks(fleet: Fleet, events: int, per_tx: int) -> Iterator[list[ParsedEvent]]:
    """The fleet's events as the collector parses them, ``per_tx`` at a time."""
    template = fleet.template()
    for start in range(0, events, per_tx):
        yield [parse_envelope(envelope_from_dict(fleet.envelope(template, i)))
               for i in range(start, min(start + per_tx, events))]


def run_floor(backend: Backend, admin_url: str, fleet: Fleet, per_tx: int, expected: Expected,
              log: Log) -> Run:
    name = "floor: PostgreSQL COPY" if backend == "postgresql" else "floor: SQLite executemany"
    n = expected.events
    log(f"{name}: preparing the rows of {n} events")
    transactions = prepare(parsed_chunks(fleet, n, per_tx), backend)
    log(f"{name}: loading them")
    if backend == "postgresql":
        with pg_database(admin_url, "floor") as url:
            result = load_postgresql(url, transactions, n)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-ingest-floor-") as tmp:
            result = load_sqlite(Path(tmp) / "floor.db", transactions, n)
    return Run(name, result.events, result.seconds,
               extra={"counts": result.counts, "disk_bytes": result.disk_bytes},
               problems=check_counts(result.counts, expected, name))
