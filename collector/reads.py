"""The history read API's queries: the reader ``sparkwatch history`` uses, plus progress,
rollups and stall marks over a time range, all with paging.

A database that is down or not migrated is a :class:`HistoryError` the API answers with 503 in
general terms (:class:`Withheld`: the detail names the database, its host or file, and goes to
the collector's log); an unknown query or operator is answered with 404.

Reads are bounded so that one tenant's slow reads hold up nothing else: they run on threads of
their own (:class:`ReadSlots`, ``read_concurrency``, one tenant at most half while several
read), never on the thread pool ingest and /metrics use, and every statement gives up after
``read_timeout_seconds`` (a wait for a lock after ``read_lock_timeout_seconds``), answered 503.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import anyio.to_thread
import sqlalchemy as sa
from anyio import CapacityLimiter

from sparkwatch.collector.config import BY_NAME, CollectorSettings
from sparkwatch.history import tenancy
from sparkwatch.history.engine import connect, create_engine, read_failure
from sparkwatch.history.errors import HistoryError, HistoryUnavailable, UnknownQuery, UnknownRun
from sparkwatch.history.reader import HistoryReader
from sparkwatch.history.schema import Batch, OperatorRollup, QueryRollup, QueryStall
from sparkwatch.history.views import QuerySummary, RunSummary, StatePoint
from sparkwatch.plan.codec import plan_to_dict
from sparkwatch.summary import one_line

T = TypeVar("T")

PROGRESS_COLUMNS = (
    "timestamp", "run_id", "batch_id", "batch_duration_ms", "num_input_rows",
    "input_rows_per_second", "processed_rows_per_second", "duration_ms", "event_time_min",
    "event_time_max", "event_time_avg", "watermark",
)


log = logging.getLogger(__name__)

LOOKUP_SECONDS = 2
"""The most an ingest's owner lookup may wait on the history (see :meth:`Reads.owners`)."""
SLOT_WAIT_SECONDS = 2.0
"""The most a read waits for a read slot (:class:`ReadSlots`) before its 503."""
RETRY_AFTER_SECONDS = 5
"""Retry-After of the 503 to a read that timed out or found reads busy."""


def read_bounds(settings: CollectorSettings) -> tuple[float, float]:
    """The statement and lock timeouts of a read connection: ``read_timeout_seconds``, and
    ``read_lock_timeout_seconds`` (at most the former: a lock waited for is the statement's
    time too)."""
    return settings.read_timeout_seconds, min(settings.read_lock_timeout_seconds,
                                              settings.read_timeout_seconds)


class ReadsBusy(Exception):
    """No read slot freed up within :data:`SLOT_WAIT_SECONDS`; the read did not start."""


class ReadSlots:
    """The history reads (the read API's and the console's pages') running at once: at most
    ``capacity``, on a thread limiter of their own (never the default pool ingest, /metrics and
    the auth checks use); while several read scopes exist (tenants' read tokens, the admin's),
    one scope runs at most half of them, as the in-flight bytes' and the spool's shares. A read
    past its scope's share or the whole waits up to ``wait_seconds``, then :class:`ReadsBusy`.
    Slots are counted from the event loop only."""

    def __init__(self, capacity: int, wait_seconds: float = SLOT_WAIT_SECONDS,
                 scopes: int = 1) -> None:
        self.capacity = capacity
        self.wait_seconds = wait_seconds
        self._scopes = scopes
        self.used = 0
        self._held: dict[str, int] = {}
        self._changed = asyncio.Condition()
        self._threads = CapacityLimiter(capacity)

    def share(self) -> int:
        return self.capacity if self._scopes <= 1 else max(1, self.capacity // 2)

    async def run(self, tenant: str | None, work: Callable[[], T]) -> T:
        """``work()`` on a read thread, in a slot of ``tenant``'s share (None: the admin's or
        open reads). The slot is held until the thread returns, even if the caller goes away:
        a thread cannot be stopped, its statement's timeout ends it."""
        key = "" if tenant is None else "t:" + tenant
        await self._take(key)
        try:
            return await anyio.to_thread.run_sync(work, limiter=self._threads)
        finally:
            await self._give(key)

    async def _take(self, key: str) -> None:
        share = self.share()

        def room() -> bool:
            return self.used < self.capacity and self._held.get(key, 0) < share

        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(room), self.wait_seconds)
            except TimeoutError:
                raise ReadsBusy(self._why_busy(key, share)) from None
            self.used += 1
            self._held[key] = self._held.get(key, 0) + 1

    def _why_busy(self, key: str, share: int) -> str:
        held = self._held.get(key, 0)
        if held >= share:
            return (f"reads are busy: this caller's scope has {held} history reads running, "
                    f"its share of read_concurrency ({share} of {self.capacity}); retry when "
                    "they end")
        # Not how many reads each other tenant runs: any read token's holder reads this.
        return (f"reads are busy: all {self.capacity} history reads (read_concurrency) are "
                f"running, {held} of them this caller's; retry shortly")

    async def _give(self, key: str) -> None:
        async with self._changed:
            self.used -= 1
            left = self._held.pop(key, 0) - 1
            if left:
                self._held[key] = left
            self._changed.notify_all()


class Reads:
    def __init__(self, url: str, bounds: tuple[float, float] = (30.0, 5.0)) -> None:
        """``bounds``: the statement and lock timeouts of every read (:func:`read_bounds`)."""
        self._url = url
        self._bounds = bounds
        self._lock = threading.Lock()
        self._reader: HistoryReader | None = None
        self._engine: sa.Engine | None = None
        self._lookups: sa.Engine | None = None

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        for engine in (self._engine, self._lookups):
            if engine is not None:
                engine.dispose()

    def _ready(self) -> tuple[HistoryReader, sa.Engine]:
        """Created on first use: a SQLite file that does not exist yet is not an error at start."""
        with self._lock:
            if self._reader is None:
                self._reader = HistoryReader(self._url, keep_notes=False,
                                             read_bounds=self._bounds)
            if self._engine is None:
                self._engine = create_engine(self._url, read_bounds=self._bounds)
            return self._reader, self._engine

    def _with(self, view: Callable[[HistoryReader], T]) -> T:
        reader, _ = self._ready()
        try:
            return view(reader)
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise read_failure(exc) from None

    def owners(self, run_ids: set[str], query_ids: set[str]) -> dict[str, str]:
        """Who the history says owns these ids (see :func:`.tenancy.known_owners`), asked on an
        engine of its own that gives up within :data:`LOOKUP_SECONDS`: ingest waits on it (a
        migration's lock, an unreachable server). Raises :class:`HistoryUnavailable`."""
        with self._lock:
            if self._lookups is None:
                self._lookups = create_engine(self._url, must_exist=True,
                                              sqlite_busy_seconds=LOOKUP_SECONDS,
                                              quick_seconds=LOOKUP_SECONDS)
            engine = self._lookups
        try:
            with engine.connect() as conn:
                return tenancy.known_owners(conn, run_ids, query_ids)
        except sa.exc.DBAPIError as exc:
            raise HistoryUnavailable(f"history query failed: {one_line(exc)}") from None

    # ``tenant``: the caller's read scope; None (the admin read token, or open reads) reads
    # every tenant's. A query of another tenant is unknown (404), as if it did not exist.

    def queries(self, limit: int, offset: int, tenant: str | None = None) -> list[QuerySummary]:
        return self._with(lambda r: r.queries(limit, offset, tenant))

    def runs(self, query: str, limit: int, offset: int,
             tenant: str | None = None) -> list[RunSummary]:
        _check_text(query)
        return self._with(lambda r: r.runs(query, limit, offset, tenant))

    def exception(self, query: str, run_id: str, tenant: str | None = None) -> dict[str, str]:
        """The whole exception of one run of the query; :class:`UnknownRun` when the query has
        no such run, or the run ended without one."""
        _check_text(query)
        if "\x00" in run_id:  # as in a name (below): PostgreSQL would refuse it, a 503
            raise UnknownRun("no run has a NUL character in its id")

        def read(reader: HistoryReader) -> dict[str, str]:
            query_id = reader.resolve_query(query, tenant)
            text = reader.exception(query_id, run_id, tenant)
            if text is None:
                raise UnknownRun(f"query {query_id!r} has no run {run_id!r} that ended with an "
                                 "exception")
            return {"query_id": query_id, "run_id": run_id, "exception": text}

        return self._with(read)

    def state(self, query: str, operator: int | None, since: datetime | None,
              until: datetime | None, limit: int, offset: int,
              tenant: str | None = None) -> list[StatePoint]:
        _check_text(query)
        return self._with(lambda r: r.state(query, operator, since, until, limit, offset,
                                             tenant))

    def plans(self, query: str, limit: int, offset: int,
              tenant: str | None = None) -> list[dict[str, Any]]:
        """Operator identity of the query's runs, latest read first."""
        _check_text(query)
        plans = self._with(lambda r: r.plans(query, tenant=tenant, limit=limit, offset=offset))
        return [plan_to_dict(p) for p in plans]

    def resolve(self, query: str, tenant: str | None = None) -> str:
        _check_text(query)
        return self._with(lambda r: r.resolve_query(query, tenant))

    def progress(self, query: str, since: datetime | None, until: datetime | None, limit: int,
                 offset: int, tenant: str | None = None) -> list[dict[str, Any]]:
        """Per-batch progress of one query, oldest first (newest ``limit`` without ``since``)."""
        b = Batch.__table__.c
        stmt = sa.select(*(b[c] for c in PROGRESS_COLUMNS)).where(
            b.query_id == self.resolve(query, tenant))
        return self._range(stmt, b.timestamp, [b.timestamp, b.batch_id], since, until, limit,
                           offset)

    def rollups(self, query: str, resolution: str, operator: int | None, since: datetime | None,
                until: datetime | None, limit: int, offset: int,
                tenant: str | None = None) -> list[dict[str, Any]]:
        model = QueryRollup if operator is None else OperatorRollup
        t = model.__table__.c
        query_id = self.resolve(query, tenant)
        stmt = sa.select(model.__table__).where(t.query_id == query_id,
                                                t.resolution == resolution)
        order = [t.bucket_start]
        if operator is not None:
            stmt = stmt.where(t.operator_index == operator)
        rows = self._range(stmt, t.bucket_start, order, since, until, limit, offset)
        if not rows and operator is not None:
            # An operator the query never had is a 404 naming its operators, as /state's is (it
            # was an empty 200).
            self._with(lambda r: r.check_operator(query_id, operator))
        return rows

    def stalls(self, open_only: bool, limit: int, offset: int,
               tenant: str | None = None) -> list[dict[str, Any]]:
        s = QueryStall.__table__
        stmt = sa.select(*(c for c in s.c if c.name != "tenant")).order_by(
            s.c.detected_at.desc(), s.c.run_id)
        if tenant is not None:
            stmt = stmt.where(s.c.tenant == tenant)
        if open_only:
            stmt = stmt.where(s.c.cleared_at.is_(None))
        return self._rows(stmt.limit(limit).offset(offset))

    def _range(self, stmt: sa.Select[Any], time_column: Any, order: list[Any],
               since: datetime | None, until: datetime | None, limit: int,
               offset: int) -> list[dict[str, Any]]:
        """Like the reader's state(): newest ``limit`` rows, or the first from ``since``."""
        if since is not None:
            stmt = stmt.where(time_column >= since)
        if until is not None:
            stmt = stmt.where(time_column < until)
        if since is None:
            rows = self._rows(stmt.order_by(*(c.desc() for c in order)).limit(limit)
                              .offset(offset))
            return list(reversed(rows))
        return self._rows(stmt.order_by(*order).limit(limit).offset(offset))

    def _rows(self, stmt: sa.Select[Any]) -> list[dict[str, Any]]:
        _, engine = self._ready()
        try:
            with connect(engine) as conn:
                return [dict(row._mapping) for row in conn.execute(stmt)]
        except (sa.exc.DBAPIError, sa.exc.TimeoutError) as exc:
            raise read_failure(exc) from None


def _check_text(query: str) -> None:
    # PostgreSQL text cannot hold NUL: such a name can match no query.
    if "\x00" in query:
        raise UnknownQuery("no query has a NUL character in its id or name")


REPEAT_SECONDS = 300.0
"""A failure already logged is logged again at most this often (with how many answers met it)."""
MAX_REMEMBERED = 100


class Withheld:
    """What the read API answers for a history that cannot be read: :attr:`HistoryError.public`
    and a reference; the detail (the database's host and name, a file) goes to the log under
    that reference, once per distinct detail every :data:`REPEAT_SECONDS` (a dashboard polling
    a stopped database would otherwise write a line per request)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[str, float, int]] = {}  # detail: ref, logged at, answered

    def answer(self, exc: HistoryError) -> str:
        detail = collector_detail(exc)
        with self._lock:
            ref, logged_at, answered = self._seen.get(detail, ("", -REPEAT_SECONDS, 0))
            due = self._clock() - logged_at >= REPEAT_SECONDS
            if due:
                ref = ref or uuid.uuid4().hex[:10]
                if len(self._seen) >= MAX_REMEMBERED:
                    self._seen.clear()
                self._seen[detail] = (ref, self._clock(), 0)
            else:
                self._seen[detail] = (ref, logged_at, answered + 1)
        if due:
            since = f"; {answered} more answers met it since it was logged" if answered else ""
            log.warning("history read answered 503 (ref %s%s): %s", ref, since, detail)
        return f"{exc.public}; the collector's log says why (ref {ref})"


def collector_detail(exc: HistoryError) -> str:
    """The error as the collector's operator should read it: a missing SQLite file's hint
    names the collector's setting, not the command line's ``--url``."""
    if isinstance(exc, HistoryUnavailable) and exc.hint:
        setting = BY_NAME["history_url"]
        return (f"{exc.message} (check {setting.flag} or {setting.env}: the collector creates "
                "the file at start where its directory exists, `sparkwatch db upgrade` too)")
    return str(exc)
