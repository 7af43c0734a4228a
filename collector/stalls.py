"""Stalled queries: a running run with no progress and no idle event for N trigger intervals.

Detection is a leased job over the shared history (any replica may have received the run's
events): it opens a mark in ``query_stalls`` and clears it once the run reports again or ends.
Every replica reads the open marks into a :class:`StallBoard` for its
``spark_streaming_query_stalled`` gauge, so the gauge agrees whichever replica Prometheus scrapes.

The trigger interval is not in Spark's events; it is estimated as the median gap between the run's
recent batches. The threshold never goes below ``min_seconds``: Spark reports an idle query only
every ``spark.sql.streaming.noDataProgressEventInterval`` (10 s by default), whatever the trigger.

Silence is measured from the run's ``last_event_at``, which the history writer keeps no later than
when it stored the event (``writer._upsert_runs``): an event stamped ahead by a driver's clock
cannot postpone a stall, or the lost-runs job, past what the collector actually heard.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sparkwatch.collector.tenants import TENANT_LABEL, Tenants
from sparkwatch.history import lost, replicas
from sparkwatch.history.schema import Batch, QueryRun, QueryStall
from sparkwatch.history.tenancy import CHUNK, among
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.tenant import DEFAULT_TENANT

RECENT_BATCHES = 11


WrittenUntil = Callable[[], datetime]
"""Every event acknowledged before the time it returns is in the history (the pump's)."""


def _seen(conn: sa.Connection, now: datetime, written_until: WrittenUntil | None,
          replica: str | None) -> datetime:
    """Up to when the history tells whether a run was silent: ``now``, or earlier while this
    replica's spool (``written_until``, fresher than its own report) or another live replica's
    is still behind (after an outage every run's last event would look old)."""
    seen = now if written_until is None else min(now, written_until())
    others = replicas.least_written_until(conn, now, other_than=replica)
    return seen if others is None else min(seen, others)


@dataclass(frozen=True, slots=True)
class StallDetection:
    intervals: int
    min_seconds: float
    horizon_days: float
    """Runs silent for longer than this are history, not stalls (and retention's business)."""
    written_until: WrittenUntil | None = None
    replica: str | None = None
    """the replica running the job, whose own report ``written_until`` supersedes"""

    def __call__(self, conn: sa.Connection, now: datetime) -> tuple[int, int]:
        """Open marks for newly stalled runs, clear those that resumed; (opened, cleared)."""
        seen = _seen(conn, now, self.written_until, self.replica)
        horizon = now - timedelta(days=self.horizon_days)
        runs = {r.run_id: r for r in conn.execute(_active_runs(horizon))}
        gaps = _trigger_intervals(conn, list(runs))
        open_marks = {m.run_id: m for m in conn.execute(
            sa.select(QueryStall.__table__).where(QueryStall.cleared_at.is_(None)))}
        cleared = [
            mark.run_id for mark in open_marks.values()
            if mark.run_id not in runs or runs[mark.run_id].last_event_at > mark.last_event_at
        ]
        _clear(conn, cleared, now)
        opened = []
        for run in runs.values():
            threshold = self.threshold(gaps.get(run.run_id))
            silent = (seen - run.last_event_at).total_seconds()
            if silent >= threshold and (run.run_id not in open_marks or run.run_id in cleared):
                opened.append(_mark(run, now, threshold))
        if opened:
            conn.execute(sa.insert(QueryStall), opened)
        return len(opened), len(cleared)

    def threshold(self, interval: float | None) -> float:
        return max(self.min_seconds, self.intervals * interval) if interval else self.min_seconds


@dataclass(frozen=True, slots=True)
class LostRuns:
    """Runs silent for ``silent_seconds`` end as lost (:mod:`sparkwatch.history.lost`): the
    collector passes the stall horizon (``--retention-days``), beyond which a silent run is no
    longer a stall but a driver that died without saying so."""

    silent_seconds: float
    written_until: WrittenUntil | None = None
    replica: str | None = None

    def __call__(self, conn: sa.Connection, now: datetime) -> tuple[int, int]:
        seen = _seen(conn, now, self.written_until, self.replica)
        return lost.end_silent(conn, seen, self.silent_seconds, heard_by=now), 0


def _active_runs(horizon: datetime) -> sa.Select[Any]:
    r = QueryRun.__table__.c
    return sa.select(r.run_id, r.tenant, r.query_id, r.name, r.app_name, r.app_id,
                     r.last_event_at).where(
        r.ended_at.is_(None), r.last_event_at >= horizon
    )


def _trigger_intervals(conn: sa.Connection, run_ids: list[str]) -> dict[str, float]:
    """Median seconds between each run's recent batches (runs with fewer than two: absent)."""
    times: dict[str, list[datetime]] = {}
    for ids in _id_groups(conn, run_ids):
        for run_id, ts in conn.execute(_recent_batches(conn, ids)):
            times.setdefault(run_id, []).append(ts)
    out = {}
    for run_id, stamps in times.items():
        stamps.sort()
        gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]
        if gaps:
            out[run_id] = statistics.median(gaps)
    return out


def _recent_batches(conn: sa.Connection, run_ids: list[str]) -> sa.Select[Any]:
    """(run id, time) of the last :data:`RECENT_BATCHES` batches of each of ``run_ids``.

    Each run's floor, the id of its :data:`RECENT_BATCHES`-th latest batch, is read backwards
    on the batches' key (run id, batch id), and only the batches from it are read: ranking every
    batch of every running run read all of them, every 30 s (a week of a 1-second trigger is
    604,800 batches per run), to keep 11."""
    b = Batch.__table__.c
    r = QueryRun.__table__.c
    older = Batch.__table__.alias("older").c
    floor = (sa.select(older.batch_id).where(older.run_id == r.run_id)
             .order_by(older.batch_id.desc()).offset(RECENT_BATCHES - 1).limit(1)
             .scalar_subquery())
    floors = sa.select(r.run_id, floor.label("floor")).where(
        among(conn, r.run_id, run_ids)).subquery()
    # A run with fewer batches has no floor: all of them (batch ids are never negative).
    return sa.select(b.run_id, b.timestamp).join_from(
        Batch.__table__, floors,
        (b.run_id == floors.c.run_id) & (b.batch_id >= sa.func.coalesce(floors.c.floor, -1)))


def _clear(conn: sa.Connection, run_ids: list[str], now: datetime) -> None:
    """Clear the open marks of ``run_ids`` at ``now``."""
    s = QueryStall.__table__.c
    for ids in _id_groups(conn, run_ids):
        conn.execute(sa.update(QueryStall).where(
            s.cleared_at.is_(None), among(conn, s.run_id, ids)).values(cleared_at=now))


def _id_groups(conn: sa.Connection, ids: list[str]) -> Iterator[list[str]]:
    """``ids`` in groups that fit in one statement, however many runs one tenant has: all at
    once on PostgreSQL (one array parameter, :func:`~sparkwatch.history.tenancy.among`),
    whose limit is 65,535 parameters; :data:`~sparkwatch.history.tenancy.CHUNK` at a time on
    SQLite, one variable each (32,766 a statement by default, 999 before SQLite 3.32)."""
    size = len(ids) if conn.dialect.name == "postgresql" else CHUNK
    for start in range(0, len(ids), max(size, 1)):
        yield ids[start:start + size]


def _mark(run: Any, now: datetime, threshold: float) -> dict[str, Any]:
    return {
        "run_id": run.run_id, "tenant": run.tenant, "detected_at": now,
        "query_id": run.query_id, "name": run.name,
        "app_name": run.app_name, "app_id": run.app_id, "last_event_at": run.last_event_at,
        "threshold_seconds": threshold, "cleared_at": None,
    }


StallKey = tuple[str, str, str]
"""(tenant, app id, query id)"""


class StallBoard:
    """This replica's copy of the open stall marks, refreshed from the database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[StallKey, tuple[str, str]] = {}

    def refresh(self, engine: sa.Engine) -> None:
        s = QueryStall.__table__.c
        with engine.connect() as conn:
            rows = conn.execute(sa.select(s.tenant, s.app_id, s.query_id, s.app_name, s.name)
                                .where(s.cleared_at.is_(None)))
            fresh = {(r.tenant, r.app_id, r.query_id): (r.app_name, r.name or "") for r in rows}
        with self._lock:
            self._open = fresh

    def snapshot(self) -> dict[StallKey, tuple[str, str]]:
        with self._lock:
            return dict(self._open)


class StalledGauge(Collector):
    """``spark_streaming_query_stalled``: 0 or 1 for every query in /metrics, 1 for stalled
    queries this replica holds no series for; labelled with the tenant when given
    :class:`Tenants` (the collector), without when given one state."""

    def __init__(self, state: MetricState | Tenants, board: StallBoard,
                 exported: bool = True) -> None:
        self._tenants = state if isinstance(state, Tenants) else None
        self._states = (lambda: state.items()) if isinstance(state, Tenants) else (
            lambda: [(DEFAULT_TENANT, state)])
        self._board = board
        self._exported = exported
        """False when the metric profile leaves the gauge out."""

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        return self.collect_for(None)

    def collect_for(self, only: str | None) -> list[Metric]:
        """The gauge for every tenant, or for tenant ``only`` (its read token's exposition)."""
        if not self._exported:
            return []
        metric = cat.QUERY_STALLED
        scoped = self._tenants is not None
        names = (TENANT_LABEL, *metric.labels) if scoped else metric.labels
        family = GaugeMetricFamily(metric.family, metric.help, labels=names)

        def add(tenant: str, values: list[str], value: int) -> None:
            family.add_metric([tenant, *values] if scoped else values, value)

        stalled = self._board.snapshot()
        seen = set()
        for tenant, state in self._states():
            if only is not None and tenant != only:
                continue
            with state.read() as (_, queries):
                for q in queries:
                    key = (tenant, *q.key)
                    seen.add(key)
                    add(tenant, [q.app.name, q.app.id, q.query_id, q.name], int(key in stalled))
        for key, (app_name, name) in sorted(stalled.items()):
            if key not in seen and (scoped or key[0] == DEFAULT_TENANT) \
                    and only in (None, key[0]):
                add(key[0], [app_name, key[1], key[2], name], 1)
        return [family]
