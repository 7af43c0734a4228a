"""The history writer: parsed events in, rows out, idempotently and in one transaction.

Idempotent on Spark's keys: batch rows are inserted with ON CONFLICT DO NOTHING, run rows are
upserted so later events fill in what earlier ones did not know. Writing the same events again (a
retry after a failed commit, a replayed spool) changes nothing, so the caller may simply retry.
"""

from __future__ import annotations

import logging
import os
import socket
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from sparkwatch.history import counts, lost, migrate, partitions, rollups, tenancy
from sparkwatch.history.clock import bounded_now
from sparkwatch.history.copy import copy_statements, is_duplicate, supports_copy
from sparkwatch.history.copyrows import copy_rows
from sparkwatch.history.engine import SQLITE_WRITER_BUSY_SECONDS, create_engine, describe_url
from sparkwatch.history.errors import (
    UPGRADE_HINT,
    HistoryUrlError,
    SchemaNotMigrated,
    is_data_error,
)
from sparkwatch.history.revision import holds_history
from sparkwatch.history.rows import NO_BOUNDS, Row, plan_rows, rows_for, run_rows, trigger_rows
from sparkwatch.history.schema import (
    LOST,
    Batch,
    OperatorBatch,
    OperatorPlan,
    QueryRun,
    RunTrigger,
    SinkBatch,
    SourceBatch,
)
from sparkwatch.history.sqlite_rows import insert_new as insert_new_values
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.tenant import DEFAULT_TENANT
from sparkwatch.plan.model import QueryPlan

log = logging.getLogger(__name__)

PARTITIONS_RETRY = timedelta(seconds=60)
"""How soon a writer tries again to create the partitions another session's lock held up."""


class HistoryWriter:
    """Writes events to the SQL history at ``url``.

    Nothing touches the database before the first :meth:`write`; with ``migrate`` that write first
    upgrades the schema to head (once per writer). Any failure but one of the data starts the next
    attempt afresh (:meth:`_start_afresh`): new connections, and the schema upgraded again (with
    ``migrate``) or checked to exist (without), so that a database replaced while the writer runs
    (dropped and recreated empty, a SQLite file moved away) is written again once it is back, or
    said to need its schema. Not thread-safe: one writer thread owns it.
    """

    def __init__(self, url: str, migrate: bool = True,
                 lost_after_seconds: float = lost.DEFAULT_SILENT_SECONDS) -> None:
        self.url = url
        self._migrate = migrate
        self._lost_after_seconds = lost_after_seconds
        self._engine: sa.Engine | None = None
        self._migrated = False
        """With ``migrate``: the schema was upgraded to head on this engine."""
        self._check_schema = False
        """Without ``migrate``: look for the schema before the next write (after a failure)."""
        self._partitions_until: datetime | None = None
        """The last day this writer made sure has its partitions (PostgreSQL, migration 0010)."""
        self._partitions_retry_at: datetime | None = None
        """After a creation another session's lock held up: not tried again before this."""
        self._copy: bool | None = None
        """COPY for new batches (PostgreSQL with psycopg 3); None until the first write knows."""
        # Names this driver in job_runs when it claims a rollups slot.
        self._replica = f"listener-{socket.gethostname()}-{os.getpid()}"

    def write(self, events: Sequence[ParsedEvent], tenants: Sequence[str] | None = None
              ) -> list[int]:
        """Write ``events`` in one transaction; ``tenants``: the tenant of each (default: all
        ``default``). Events naming a run or query of another tenant are left out
        (:mod:`.tenancy`): returns their indexes in ``events``, for the caller to keep
        (:data:`.tenancy.FOREIGN`), as nothing else records them.

        Raises :class:`~sparkwatch.history.errors.HistoryUrlError` for an unusable URL (retrying
        will not help). Anything else (``HistoryUnavailable``, SQLAlchemy errors) means the
        database failed and nothing was committed: retry with the same events.
        """
        if not events:
            return []
        with self._afresh_after_failure():
            return self._write(events, tenants)

    def _write(self, events: Sequence[ParsedEvent], tenants: Sequence[str] | None) -> list[int]:
        engine = self._ready_engine()
        with engine.connect() as conn:
            events, run_tenants, foreign = tenancy.owned(
                conn, events, tenants if tenants is not None else [DEFAULT_TENANT] * len(events))
        if not events:
            return foreign
        runs = run_rows(events)
        for run in runs:
            run["tenant"] = run_tenants[run["run_id"]]
        if self._copy is not False and self._write_by_copy(engine, runs, events):
            return foreign
        if engine.dialect.name == "sqlite" and self._write_sqlite(engine, runs, events):
            return foreign
        rows = rows_for(events)
        rows.runs = runs
        self._ensure_partitions(engine, max((r["timestamp"] for r in rows.batches), default=None))
        with engine.begin() as conn:
            _upsert_runs(conn, rows.runs)
            lost.end_replaced(conn, rows.runs)
            counts.add(conn, _insert_new_batches(conn, rows.batches))
            _insert_new(conn, OperatorBatch, rows.operators)
            _insert_new(conn, SourceBatch, rows.sources)
            _insert_new(conn, SinkBatch, rows.sinks)
        return foreign

    def _write_sqlite(self, engine: sa.Engine, runs: list[Row],
                      events: Sequence[ParsedEvent]) -> bool:
        """SQLite's fast path: every row as a positional tuple (:mod:`.sqlite_rows`). False when
        some batch exists already, and nothing was written, so the idempotent INSERTs must run
        instead (as :meth:`_write_by_copy` on PostgreSQL)."""
        rows = copy_rows(events)
        with engine.connect() as conn, conn.begin() as transaction:
            # Every batch new (the common case, checked below): each run gains all of its own.
            _upsert_runs(conn, runs, counts.per_run(rows.batch_runs))
            lost.end_replaced(conn, runs)
            batches = rows.values["batches"]
            if insert_new_values(conn, Batch, "batches", batches) < len(batches):
                transaction.rollback()
                log.debug("events include batches already in the history (a replay): writing "
                          "them with INSERT ... ON CONFLICT DO NOTHING")
                return False
            for model, table in ((OperatorBatch, "operators"), (SourceBatch, "sources"),
                                 (SinkBatch, "sinks")):
                insert_new_values(conn, model, table, rows.values[table])
        return True

    def _write_by_copy(self, engine: sa.Engine, runs: list[Row],
                       events: Sequence[ParsedEvent]) -> bool:
        """The fast path (PostgreSQL): False when some batch exists already, and nothing was
        written, so the idempotent INSERTs must run instead (or when COPY is not to be had).
        The per-batch rows are built straight as COPY values (:mod:`.copyrows`)."""
        if self._copy is None:
            self._copy = supports_copy(engine.dialect)
        if not self._copy:
            return False
        rows = copy_rows(events)
        self._ensure_partitions(engine, rows.newest)
        try:
            with engine.begin() as conn:
                # COPY writes every batch or none: each run gains all of its batches here.
                _upsert_runs(conn, runs, counts.per_run(rows.batch_runs))
                lost.end_replaced(conn, runs)
                copy_statements(conn, rows.statements())
        except Exception as exc:
            if not is_duplicate(exc):
                raise
            log.debug("events include batches already in the history (a replay): writing them "
                      "with INSERT ... ON CONFLICT DO NOTHING")
            return False
        return True

    def _ensure_partitions(self, engine: sa.Engine, newest: datetime | None) -> None:
        """Partitions ahead of the batches being written (``newest``: the latest batch time,
        None without batches), checked again once the newest batch reaches the last day made
        sure of: without a collector nothing else creates them. (A write never fails without
        one: its rows wait in the DEFAULT partition.) A batch time is the driver's clock, or
        whatever a pusher wrote: only from :data:`~.partitions.DAYS_BEHIND` days before this
        clock to :data:`~.partitions.DAYS_AHEAD` after it does, so that far-off times make no
        tables (their rows wait in DEFAULT)."""
        now = datetime.now(UTC)
        if newest is None or newest < now - partitions.DAYS_BEHIND * partitions.DAY:
            return
        if newest > now + partitions.DAYS_AHEAD * partitions.DAY:
            newest = now
        if self._partitions_until is not None and newest < self._partitions_until:
            return
        if self._partitions_retry_at is not None and now < self._partitions_retry_at:
            return
        busy = None
        with engine.begin() as conn:
            try:
                partitions.ensure_ahead(conn, newest, on_busy="raise")
            except partitions.PartitionsBusy as exc:  # the days made before it stand
                busy = exc
        if busy is not None:
            # Not made sure of: tried again in a while, not once the batches reach the last day
            # (days later, with every row of the days between waiting in DEFAULT meanwhile).
            self._partitions_retry_at = datetime.now(UTC) + PARTITIONS_RETRY
            log.info("partitions not created now, tried again in %.0f s: %s",
                     PARTITIONS_RETRY.total_seconds(), busy)
            return
        self._partitions_retry_at = None
        self._partitions_until = partitions.day_of(newest) + partitions.DAYS_AHEAD * partitions.DAY

    def write_plans(self, plans: Sequence[QueryPlan], tenants: Sequence[str] | None = None
                    ) -> list[int]:
        """Write operator identities, replacing what an earlier read of the same run said (a
        plan read later may know more than a fallback to the progress). ``tenants``: the tenant
        of each plan (pushed to a collector); then only plans of runs their tenant owns in the
        history are written (a plan claims no run: its events did). Without, every plan is
        written (the listener's own history, where a plan may come before its run's row).
        Returns the indexes (in ``plans``) of those left out (:data:`.tenancy.FOREIGN_PLAN`)."""
        if not plans:
            return []
        with self._afresh_after_failure():
            return self._write_plans(plans, tenants)

    def _write_plans(self, plans: Sequence[QueryPlan], tenants: Sequence[str] | None
                     ) -> list[int]:
        engine = self._ready_engine()
        foreign: list[int] = []
        if tenants is not None:
            with engine.connect() as conn:
                plans, foreign = tenancy.owned_plans(conn, plans, tenants)
        rows = [row for plan in plans for row in plan_rows(plan)]
        triggers = [row for plan in plans for row in trigger_rows(plan)]
        if not rows and not triggers:
            return foreign
        with engine.begin() as conn:
            _replace(conn, OperatorPlan, ("run_id", "operator_index"), rows)
            _replace(conn, RunTrigger, ("run_id",), triggers)
        return foreign

    def roll_up(self, now: datetime, interval_seconds: float) -> bool:
        """Recompute the recent rollups (:mod:`sparkwatch.history.rollups`) and end the runs
        silent too long (:mod:`.lost`), unless a collector or another driver did for this slot;
        nothing before this writer's first write. ``now`` is bounded by the database's clock
        (:mod:`.clock`): a driver's clock years ahead ended every driver's runs as lost."""
        if self._engine is None or self._check_schema or not self._migrated and self._migrate:
            return False
        with self._afresh_after_failure(), self._engine.begin() as conn:
            now = bounded_now(conn, now)
            if not rollups.recompute_once_per_slot(conn, now, interval_seconds, self._replica):
                return False
            lost.end_silent(conn, now, self._lost_after_seconds)
            return True

    def end_abandoned(self, run_ids: Collection[str]) -> int:
        """End as lost the runs of ``run_ids`` still running (:func:`.lost.end_abandoned`)."""
        if not run_ids:
            return 0
        with self._afresh_after_failure(), self._ready_engine().begin() as conn:
            return lost.end_abandoned(conn, run_ids)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def _ready_engine(self) -> sa.Engine:
        if self._engine is None:
            self._engine = create_engine(self.url, sqlite_busy_seconds=SQLITE_WRITER_BUSY_SECONDS)
        if self._migrate and not self._migrated:
            migrate.upgrade(self._engine)
            self._migrated = True
            log.info("history schema at %s", migrate.head())
        elif not self._migrate and self._check_schema:
            self._check_has_schema(self._engine)
        self._check_schema = False
        return self._engine

    def _check_has_schema(self, engine: sa.Engine) -> None:
        """Without ``migrate``, after a failure: raise :class:`SchemaNotMigrated` when the
        history has none of its tables (a database recreated empty, a new SQLite file), which
        this writer may not create: the message says what to run, where the INSERTs would only
        say a table is missing, on every attempt. A schema of another revision is not checked
        here (a write it cannot take fails as it did)."""
        with engine.connect() as conn:
            found = holds_history(conn)
        if not found:
            raise SchemaNotMigrated(
                f"{describe_url(engine.url)} has no sparkwatch history schema, and this writer "
                f"does not migrate (history migrate is off): {UPGRADE_HINT} against it")

    @contextmanager
    def _afresh_after_failure(self) -> Iterator[None]:
        """Start the next attempt afresh when this one fails for another reason than its data
        (a data error is the events', and the same connection takes the others)."""
        try:
            yield
        except Exception as exc:
            if not isinstance(exc, HistoryUrlError) and not is_data_error(exc):
                self._start_afresh()
            raise

    def _start_afresh(self) -> None:
        """Forget the engine and what was checked on it: the next attempt opens new connections
        (SQLite opens its path again, where a new file may stand) and checks the schema again
        (and creates it, with ``migrate``), as the database may have been replaced. Its
        partitions too are made sure of again."""
        engine, self._engine = self._engine, None
        self._migrated = False
        self._check_schema = True
        self._partitions_until = None
        if engine is None:
            return
        try:
            engine.dispose()
        except Exception as exc:  # noqa: BLE001 - closing a connection already lost
            log.debug("history engine disposed with an error: %s", exc)


def _insert(conn: sa.Connection, model: type[Any]) -> Any:
    """The dialect's INSERT, which has ON CONFLICT (the engine only accepts these two)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(model)


def _replace(conn: sa.Connection, model: type[Any], keys: tuple[str, ...],
             rows: list[Row]) -> None:
    """Insert ``rows``, replacing those with the same ``keys``."""
    if not rows:
        return
    stmt = _insert(conn, model)
    values = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
    conn.execute(stmt.on_conflict_do_update(index_elements=keys, set_=values), rows)


def _insert_new(conn: sa.Connection, model: type[Any], rows: list[Row]) -> None:
    if rows:
        conn.execute(_insert(conn, model).on_conflict_do_nothing(), rows)


def _insert_new_batches(conn: sa.Connection, rows: list[Row]) -> Counter[str]:
    """Insert the batches not in the history yet; returns how many each run gained."""
    if not rows:
        return Counter()
    stmt = _insert(conn, Batch).on_conflict_do_nothing().returning(Batch.run_id)
    return counts.per_run(conn.execute(stmt, rows).scalars())


def _upsert_runs(conn: sa.Connection, rows: list[Row], added: Mapping[str, int] | None = None,
                 ) -> None:
    """Insert runs or fill in what the new events know (rows hold one run each, see rows.py);
    ``added`` batches are added to each run's count.

    A row's ``first_batch_id``, ``last_batch_id`` and ``last_progress_at`` (the bounds of its
    events' batches, :func:`.rows.run_rows`; absent or None: no batch) only ever widen what is
    stored: the least first, the greatest last and latest. Every path writes each batch it is
    given or finds it there already, so the bounds of all the given batches are right whether
    the batches are new, replayed or older than the stored ones (the readers take them from
    here instead of ``batches``, migration 0013).

    A run's ``last_event_at`` is when the stall and lost-runs jobs measure its silence from, so
    it is its latest event's time but never later than now, when this writes it: an event
    stamped ahead (a driver's clock, ingest takes up to a day) would otherwise hold the run
    "reporting" until the wall clock passed that time, whatever the run did meanwhile, as the
    time only grows. A time stored ahead of this clock (before this rule, or by a replica whose
    clock runs ahead) is brought back to it on the run's next write. The batch rows keep each
    event's own time; so do ``started_at`` and ``ended_at``."""
    if not rows:
        return
    added = added or {}
    now = datetime.now(UTC)
    rows = [{**NO_BOUNDS, **row, "batches": added.get(row["run_id"], 0),
             "last_event_at": min(row["last_event_at"], now)} for row in rows]
    stmt = _insert(conn, QueryRun)
    new, old = stmt.excluded, QueryRun.__table__.c
    ended = new.ended_at.is_not(None)
    stored = _no_later_than(old.last_event_at, now)
    newer = new.last_event_at > stored
    # A run ended as lost that speaks again was alive after all (lost.py), unless a later run
    # of its query replaced it: then this is a late event of a run that is over. Checked last,
    # so the subquery runs only for a lost run's newer event, not for every running run's.
    revived = (old.status == LOST) & newer & ~lost.replaced()
    values = {
        "name": sa.func.coalesce(new.name, old.name),
        "app_name": new.app_name,
        "app_id": new.app_id,
        "spark_version": new.spark_version,
        "job_tags": sa.func.coalesce(new.job_tags, old.job_tags),
        "started_at": sa.func.coalesce(new.started_at, old.started_at),
        # A run ends once; a replayed QueryStarted or progress must not make it running again,
        # except a revived one (above).
        **{c: sa.case((ended, new[c]), (revived, new[c]), else_=old[c]) for c in _END_COLUMNS},
        "last_event_at": sa.case((newer, new.last_event_at), else_=stored),
        "batches": old.batches + new.batches,
        "first_batch_id": _widened(old.first_batch_id, new.first_batch_id, lower=True),
        "last_batch_id": _widened(old.last_batch_id, new.last_batch_id),
        "last_progress_at": _widened(old.last_progress_at, new.last_progress_at),
    }
    # A run ends no earlier than its latest event (as in rows.merge_run): an end stamped by a
    # clock that stepped back, or a start arriving after the end, made a negative run.
    end, latest = values["ended_at"], values["last_event_at"]
    values["ended_at"] = sa.case((end < latest, latest), else_=end)
    # A run is only ever updated by its own tenant (tenancy.owned leaves the others out first;
    # this holds even against a writer racing it).
    conn.execute(stmt.on_conflict_do_update(index_elements=["run_id"], set_=values,
                                            where=old.tenant == new.tenant), rows)


_END_COLUMNS = ("ended_at", "exception", "error_class", "status")


def _widened(stored: sa.ColumnElement[Any], new: sa.ColumnElement[Any], lower: bool = False
             ) -> sa.ColumnElement[Any]:
    """The least (``lower``) or greatest of ``stored`` and ``new``, ignoring a NULL one (SQLite's
    two-argument min/max would return NULL; PostgreSQL's least/greatest ignore it)."""
    beyond = new < stored if lower else new > stored
    return sa.case((stored.is_(None) | beyond, new), else_=stored)


def _no_later_than(column: sa.ColumnElement[datetime], now: datetime
                   ) -> sa.ColumnElement[datetime]:
    """``column``, or ``now`` where it is later (SQL's ``least``, which SQLite spells ``min``)."""
    bound = sa.literal(now, QueryRun.__table__.c.last_event_at.type)
    return sa.case((column > bound, bound), else_=column)
