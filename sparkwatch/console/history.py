"""The console's reads of the SQL history (SQLite or PostgreSQL): what survives a restart.

Each page is a bounded number of index range scans (:mod:`sparkwatch.history.series`): the
overview counts the queries and reads one page of them and, per query, its newest batches; a query
page reads one page of operators and at most :data:`MAX_POINTS` rows per series.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from sparkwatch.console.model import (
    FAILED,
    OPERATORS_PAGE,
    OVERVIEW_PAGE,
    RUNNING,
    SILENT_SECONDS,
    TABLE_PAGE,
    BacklogPoint,
    BatchRow,
    FindingLink,
    QueryCounts,
    QueryDetail,
    QueryRow,
    RunRow,
)
from sparkwatch.console.notes import hidden
from sparkwatch.history import series
from sparkwatch.history.engine import connect, create_engine, read_failure
from sparkwatch.history.errors import HistoryError
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.schema import OperatorBatch, QueryRun
from sparkwatch.history.views import StatePoint, state_point
from sparkwatch.plan.describe import summary

T = TypeVar("T")

SPARK_POINTS = 20
MAX_POINTS = 360
"""Points per series on a query page: the newest of the selected range (an hour of 10 s
triggers; a chart is 490 pixels wide)."""
FINDINGS_SECONDS = 30.0
"""doctor's findings of a query are recomputed at most this often (they look at 200 batches)."""
class HistoryData:
    """Reads one history URL; the engine is made on first use (a driver's SQLite file may not
    exist yet when the first page is asked for)."""

    def __init__(self, url: str, bounds: tuple[float, float] | None = None) -> None:
        """``bounds``: the statement and lock timeouts of every read (a server's: see
        :func:`~sparkwatch.history.engine.create_engine`); None: the database's own."""
        self.url = url
        self._bounds = bounds
        self._lock = threading.Lock()
        self._reader: HistoryReader | None = None
        self._engine: sa.Engine | None = None
        self._findings_cache: dict[str, tuple[float, list[FindingLink]]] = {}
        self.where = "the driver's log"
        """Where a page's readers are told the detail of a failure to read was logged."""

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
                self._reader = HistoryReader(self.url, keep_notes=False,
                                             read_bounds=self._bounds)
            if self._engine is None:
                self._engine = create_engine(self.url, must_exist=True,
                                             read_bounds=self._bounds)
            return self._reader, self._engine

    def _guard(self, work: Callable[[], T]) -> T:
        try:
            return work()
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise read_failure(exc) from None

    def overview(self, tenant: str | None, page: int, now: float
                 ) -> tuple[list[QueryRow], QueryCounts]:
        """Page ``page`` of the queries (failed first, then active, then the most recently
        active) and the counts of all of them, counted by the database."""
        _, engine = self._ready()

        def read() -> tuple[list[QueryRow], QueryCounts]:
            latest = _latest_runs(tenant).subquery()
            rank = _rank(latest, now)
            with connect(engine) as conn:
                counts = _counts(conn, latest, rank)
                found = list(conn.execute(_page(latest, rank, page)).mappings())
                keys = [(q["run_id"], q["last_batch_id"]) for q in found
                        if q["last_batch_id"] is not None]
                newest = {r["query_id"]: _batch(r) for r in series.batches_at(conn, keys)}
                ops = series.runs_operators(
                    conn, [(run, last - SPARK_POINTS + 1, last) for run, last in keys])
            per_run: dict[str, dict[int, dict[str, Any]]] = {}
            for r in ops:
                per_run.setdefault(r["run_id"], {})[r["batch_id"]] = r
            rows = []
            for q in found:
                row = QueryRow(q["query_id"], q["name"], q["app_name"], q["status"],
                               last_event_at=_epoch(q["last_event_at"]))
                _fill_latest(row, newest.get(q["query_id"]), per_run.get(q["run_id"], {}))
                rows.append(row)
            return rows, counts

        return self._guard(read)

    def latest_of(self, query_ids: list[str], tenant: str | None
                  ) -> dict[str, tuple[str, float | None]]:
        """The status and last event of each of ``query_ids`` the history knows (the live
        queries: the overview counts them by their live status instead)."""
        _, engine = self._ready()

        def read() -> dict[str, tuple[str, float | None]]:
            out: dict[str, tuple[str, float | None]] = {}
            with connect(engine) as conn:
                for start in range(0, len(query_ids), 500):
                    latest = _latest_runs(tenant, query_ids[start:start + 500]).subquery()
                    stmt = sa.select(latest.c.query_id, latest.c.status, latest.c.last_event_at)
                    for r in conn.execute(stmt):
                        out[r.query_id] = (r.status, _epoch(r.last_event_at))
            return out

        return self._guard(read)

    def detail(self, query: str, tenant: str | None, since: datetime | None, page: int,
               with_findings: bool = True, ops_page: int = 0) -> QueryDetail:
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
                indexes = series.operator_indexes(conn, query_id)
                shown = indexes[ops_page * OPERATORS_PAGE:(ops_page + 1) * OPERATORS_PAGE]
                operators = _operators_series(conn, query_id, shown, since)
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
                runs=[_run(r) for r in runs], table=table, operator_indexes=indexes)
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
            notes.append(hidden("doctor could not read the history", exc, self.where))
            return []
        return [FindingLink(f.code, f.severity.label, f.title, anchor_of(f.code, f.operator_index),
                            f.operator, f.operator_index) for f in found]


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


def _operators_series(conn: sa.Connection, query_id: str, indexes: list[int],
                      since: datetime | None) -> dict[int, list[StatePoint]]:
    """The newest :data:`MAX_POINTS` points of each operator of ``indexes``, oldest first: one
    statement (a union of one range scan each), not a round trip per operator."""
    if not indexes:
        return {}
    table = OperatorBatch.__table__
    scans = [sa.select(*(table.c[c] for c in series.OPERATOR_COLUMNS)).where(
        table.c.query_id == query_id, table.c.operator_index == index) for index in indexes]
    if since is not None:
        scans = [scan.where(table.c.timestamp >= since) for scan in scans]
    # Each scan limited inside its own subquery (a compound select takes one ORDER BY only).
    limited = [sa.select(scan.order_by(table.c.timestamp.desc()).limit(MAX_POINTS).subquery())
               for scan in scans]
    out: dict[int, list[StatePoint]] = {index: [] for index in indexes}
    for row in conn.execute(sa.union_all(*limited)).mappings():
        out[row["operator_index"]].append(state_point(row))
    for points in out.values():
        points.sort(key=lambda p: p.timestamp)
    return {index: points for index, points in out.items() if points}


def _latest_runs(tenant: str | None, query_ids: list[str] | None = None) -> sa.Select[Any]:
    """Each query's latest run (of ``tenant``'s, of ``query_ids`` when given)."""
    runs = QueryRun.__table__.c
    latest_first = (runs.last_event_at.desc(), runs.run_id.desc())
    ranked = sa.select(
        runs.query_id, runs.run_id, runs.name, runs.app_name, runs.status, runs.last_event_at,
        runs.last_batch_id,
        sa.func.row_number().over(partition_by=runs.query_id, order_by=latest_first).label("n"))
    if tenant is not None:
        ranked = ranked.where(runs.tenant == tenant)
    if query_ids is not None:
        ranked = ranked.where(runs.query_id.in_(query_ids))
    sub = ranked.subquery()
    return sa.select(*(c for c in sub.c if c.name != "n")).where(sub.c.n == 1)


def _rank(latest: Any, now: float) -> sa.ColumnElement[int]:
    """:func:`attention` in SQL: 0 failed, 1 active (running with an event in the last
    :data:`SILENT_SECONDS`: an older one is shown silent), 2 the rest."""
    recent = datetime.fromtimestamp(now - SILENT_SECONDS, UTC)
    return sa.case((latest.c.status == FAILED, 0),
                   (sa.and_(latest.c.status == RUNNING, latest.c.last_event_at >= recent), 1),
                   else_=2)


def _counts(conn: sa.Connection, latest: Any, rank: sa.ColumnElement[int]) -> QueryCounts:
    def of(value: int) -> Any:
        return sa.func.coalesce(sa.func.sum(sa.case((rank == value, 1), else_=0)), 0)

    row = conn.execute(sa.select(sa.func.count(), of(0), of(1)).select_from(latest)).one()
    return QueryCounts(total=int(row[0]), failed=int(row[1]), active=int(row[2]))


def _page(latest: Any, rank: sa.ColumnElement[int], page: int) -> sa.Select[Any]:
    """One page of the latest runs, with each run's last batch id as the writer keeps it on the
    run (migration 0013): no batch row is read to find it (a probe per daily partition of
    ``batches`` did, for every query of the page)."""
    return (sa.select(latest, rank.label("rank"))
            .order_by(rank, latest.c.last_event_at.desc(), latest.c.query_id)
            .limit(OVERVIEW_PAGE).offset(page * OVERVIEW_PAGE))


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
