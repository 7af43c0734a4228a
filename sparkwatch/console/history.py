"""The console's reads of the SQL history (SQLite or PostgreSQL): what survives a restart.

Each page is a bounded number of index range scans (:mod:`sparkwatch.history.series`): the
overview reads one page of queries and, per query, its newest batches; a query page reads at most
:data:`MAX_POINTS` rows per series.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from sparkwatch.console.model import (
    BacklogPoint,
    BatchRow,
    FindingLink,
    QueryDetail,
    QueryRow,
    RunRow,
)
from sparkwatch.history import series
from sparkwatch.history.engine import connect, create_engine
from sparkwatch.history.errors import HistoryError, HistoryUnavailable
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.views import state_point
from sparkwatch.plan.describe import summary
from sparkwatch.summary import one_line

T = TypeVar("T")

MAX_QUERIES = 200
"""Queries on the overview (the most recently active)."""
SPARK_POINTS = 20
MAX_POINTS = 360
"""Points per series on a query page: the newest of the selected range (an hour of 10 s
triggers; a chart is 490 pixels wide)."""
FINDINGS_SECONDS = 30.0
"""doctor's findings of a query are recomputed at most this often (they look at 200 batches)."""
TABLE_PAGE = 50


class HistoryData:
    """Reads one history URL; the engine is made on first use (a driver's SQLite file may not
    exist yet when the first page is asked for)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._lock = threading.Lock()
        self._reader: HistoryReader | None = None
        self._engine: sa.Engine | None = None
        self._findings_cache: dict[str, tuple[float, list[FindingLink]]] = {}

    def close(self) -> None:
        with self._lock:
            if self._reader is not None:
                self._reader.close()
            if self._engine is not None:
                self._engine.dispose()
            self._reader = self._engine = None

    def _ready(self) -> tuple[HistoryReader, sa.Engine]:
        with self._lock:
            if self._reader is None:
                self._reader = HistoryReader(self.url)
            if self._engine is None:
                self._engine = create_engine(self.url, must_exist=True)
            return self._reader, self._engine

    def _guard(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except sa.exc.DBAPIError as exc:
            raise HistoryUnavailable(f"history query failed: {one_line(exc)}") from None

    def overview(self, tenant: str | None) -> list[QueryRow]:
        reader, engine = self._ready()

        def read() -> list[QueryRow]:
            queries = reader.queries(MAX_QUERIES, 0, tenant)
            rows = [QueryRow(q.query_id, q.name, q.app_name, q.status) for q in queries]
            latest = [(q.latest_run_id, q.last_batch_id) for q in queries
                      if q.last_batch_id is not None]
            with connect(engine) as conn:
                newest = {r["query_id"]: _batch(r) for r in series.batches_at(conn, latest)}
                ops = series.runs_operators(
                    conn, [(run, last - SPARK_POINTS + 1, last) for run, last in latest])
            per_run: dict[str, dict[int, dict[str, Any]]] = {}
            for r in ops:
                per_run.setdefault(r["run_id"], {})[r["batch_id"]] = r
            for row, q in zip(rows, queries, strict=True):
                _fill_latest(row, newest.get(q.query_id), per_run.get(q.latest_run_id, {}))
            return rows

        return self._guard(read)

    def detail(self, query: str, tenant: str | None, since: datetime | None, page: int,
               with_findings: bool = True) -> QueryDetail:
        reader, engine = self._ready()

        def read() -> QueryDetail:
            query_id = reader.resolve_query(query, tenant)
            runs = reader.runs(query_id, 20, 0, tenant)
            latest = runs[0]
            plans = reader.plans(query_id, latest.run_id, tenant)
            with connect(engine) as conn:
                batches = [_batch(r) for r in series.batches(conn, query_id, since,
                                                             limit=MAX_POINTS)]
                table = [_batch(r) for r in series.batches(conn, query_id, limit=TABLE_PAGE,
                                                           offset=page * TABLE_PAGE)]
                operators = {
                    index: [state_point(r) for r in reversed(
                        series.operator_series(conn, query_id, index, since, limit=MAX_POINTS))]
                    for index in series.operator_indexes(conn, query_id)}
                backlog = _backlog(series.source_series(conn, query_id, since,
                                                        limit=MAX_POINTS))
            names = {i: ops[-1].operator_name for i, ops in operators.items() if ops}
            if plans:
                for op in plans[0].operators:
                    names[op.index] = f"{op.operator}: {summary(op)}"
            detail = QueryDetail(
                query_id=query_id, name=latest.name, app_name=latest.app_name,
                status=latest.status, batches=list(reversed(batches)), operators=operators,
                operator_names=names, backlog=list(reversed(backlog)),
                runs=[_run(r) for r in runs], table=table)
            if with_findings:
                detail.findings = self._findings(query_id, detail.notes)
            return detail

        return self._guard(read)

    def _findings(self, query_id: str, notes: list[str]) -> list[FindingLink]:
        """doctor's checks over the query's newest run, each linked to the chart showing it
        (kept :data:`FINDINGS_SECONDS`: an auto-refreshing page does not rerun them each time)."""
        now = time.monotonic()
        cached = self._findings_cache.get(query_id)
        if cached is not None and now - cached[0] < FINDINGS_SECONDS:
            return cached[1]
        links = self._diagnose(query_id, notes)
        if len(self._findings_cache) > 1000:
            self._findings_cache.clear()
        self._findings_cache[query_id] = (now, links)
        return links

    def _diagnose(self, query_id: str, notes: list[str]) -> list[FindingLink]:
        from sparkwatch.doctor.diagnose import diagnose
        from sparkwatch.doctor.history_source import load_record

        reader, engine = self._ready()
        try:
            with connect(engine) as conn:
                record = load_record(conn, reader, query_id)
            found = diagnose([record] if record is not None else [])
        except HistoryError as exc:
            notes.append(f"doctor could not read the history: {exc}")
            return []
        return [FindingLink(f.code, f.severity.label, f.title, anchor_of(f.code, f.operator_index),
                            f.operator) for f in found]


FINDING_CHARTS = {
    "late-rows-dropped": "dropped",
    "memory-figure-unreliable": "memory",
    "rocksdb-cache-misses": "rocksdb",
    "rocksdb-write-stalls": "rocksdb",
    "state-time-dominates": "time",
    "too-few-state-stores": "time",
    "too-many-state-stores": "time",
}
"""The operator chart that shows each doctor finding (the rest: the state rows chart)."""
QUERY_CHARTS = {"progress-events-lost": "batches", "watermark-delay-excessive": "watermark"}


def anchor_of(code: str, operator: int | None) -> str:
    if code in QUERY_CHARTS or operator is None:
        return QUERY_CHARTS.get(code, "batches")
    return f"op-{operator}-{FINDING_CHARTS.get(code, 'rows')}"


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _fill_latest(row: QueryRow, b: BatchRow | None,
                 per_batch: dict[int, dict[str, Any]]) -> None:
    """The latest run's last batch (rates, watermark lag) and its operators' rows over the
    run's last batches (the sparkline; the last one's state rows and memory)."""
    if b is not None:
        row.input_rate, row.processed_rate = b.input_rate, b.processed_rate
        row.watermark_lag, row.last_batch_id, row.last_batch_at = (
            b.watermark_lag, b.batch_id, b.timestamp)
    row.spark = [float(r["num_rows_total"]) for _, r in sorted(per_batch.items())]
    if per_batch:
        last = per_batch[max(per_batch)]
        row.state_rows = int(last["num_rows_total"])
        row.state_memory = int(last["memory_used_bytes"])


def _batch(r: dict[str, Any]) -> BatchRow:
    phases = r["duration_ms"] if isinstance(r["duration_ms"], dict) else {}
    return BatchRow(
        timestamp=r["timestamp"].timestamp(), run_id=r["run_id"], batch_id=r["batch_id"],
        duration_ms=r["batch_duration_ms"], input_rows=r["num_input_rows"],
        input_rate=r["input_rows_per_second"], processed_rate=r["processed_rows_per_second"],
        phases={k: v for k, v in phases.items() if isinstance(v, int | float)},
        watermark=_epoch(r["watermark"]))


def _run(r: Any) -> RunRow:
    return RunRow(r.run_id, r.status, _epoch(r.started_at), _epoch(r.ended_at), r.batches,
                  r.first_batch_id, r.last_batch_id, r.error_class or _first_line(r.exception))


_CREDENTIALS = re.compile(r"://[^/\s:@]+:[^/\s@]+@")


def _first_line(text: str | None) -> str | None:
    """An exception's first line, with any user:password of a URL in it hidden (the page may
    be open to whoever can reach the driver's port)."""
    if not text or not text.strip():
        return None
    return _CREDENTIALS.sub("://***@", text.strip().splitlines()[0][:300])


def offsets_behind(end: Any, latest: Any) -> float | None:
    """Sum over partitions of latest - end, for offsets shaped like Kafka's
    ``{topic: {partition: offset}}`` (or a flat ``{partition: offset}``); None otherwise."""
    if isinstance(end, int | float) and isinstance(latest, int | float):
        return max(float(latest) - float(end), 0.0)
    if not isinstance(end, dict) or not isinstance(latest, dict):
        return None
    total, found = 0.0, False
    for key, value in latest.items():
        behind = offsets_behind(end.get(key), value)
        if behind is not None:
            total, found = total + behind, True
    return total if found else None


def _backlog(rows: list[dict[str, Any]]) -> list[BacklogPoint]:
    points = []
    for r in rows:
        behind = offsets_behind(r["end_offset"], r["latest_offset"])
        if behind is not None:
            points.append(BacklogPoint(r["timestamp"].timestamp(), behind))
    return points
