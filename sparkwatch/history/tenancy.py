"""Which events of a write are their tenant's: a run id or query id belongs to the tenant whose
events used it first (its rows in ``query_runs``), so another tenant's events naming it are left
out of the write and never reach the owner's runs, batches or stall marks. A run is also its app's
(``query_runs.app_name``) and its query's (``query_runs.query_id``): another app's or another
query's events naming it are left out the same way.

The collector refuses such events at ingest already (for the ids it holds in memory); this is
the check against everything the history holds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import ARRAY

from sparkwatch.history.schema import QueryRun
from sparkwatch.model.events import ParsedEvent
from sparkwatch.plan.model import QueryPlan

log = logging.getLogger(__name__)
CHUNK = 500
"""Ids per IN list."""
FOREIGN = ("left out: names a run or query of another tenant, or a run of another app or "
           "query")
"""Why :func:`owned` left an event out (the quarantine's reason for it)."""
FOREIGN_PLAN = "left out: a plan of a run the history does not hold for its tenant"
"""Why :func:`owned_plans` left a plan out."""


def owned(conn: sa.Connection, events: Sequence[ParsedEvent], tenants: Sequence[str]
          ) -> tuple[list[ParsedEvent], dict[str, str], list[int]]:
    """The events whose ids are their tenant's (or new), the tenant of each of their runs, and
    the indexes (in ``events``) of those left out (:data:`FOREIGN`)."""
    owners = known_owners(conn, {e.event.run_id for e in events},
                           {e.event.query_id for e in events})
    kept: list[ParsedEvent] = []
    runs: dict[str, str] = {}
    foreign: list[int] = []
    for index, (parsed, tenant) in enumerate(zip(events, tenants, strict=True)):
        run_id, app, query = parsed.event.run_id, parsed.app.name, parsed.event.query_id
        ids = (run_id, "q:" + query)
        # Checked before any is claimed: a refused event must not claim the id it did own.
        if (any(owners.get(i, tenant) != tenant for i in ids)
                or owners.get("a:" + run_id, app) != app
                or owners.get("qr:" + run_id, query) != query):
            foreign.append(index)
            continue
        for i in ids:
            owners.setdefault(i, tenant)
        owners.setdefault("a:" + run_id, app)
        owners.setdefault("qr:" + run_id, query)
        kept.append(parsed)
        runs[run_id] = tenant
    if foreign:
        log.warning("left out %d events naming a run or query of another tenant, or a run of "
                    "another app or query", len(foreign))
    return kept, runs, foreign


def owned_plans(conn: sa.Connection, plans: Sequence[QueryPlan], tenants: Sequence[str]
                ) -> tuple[list[QueryPlan], list[int]]:
    """The plans whose run (of their query) the history holds for their own tenant, and the indexes
    (in ``plans``) of those left out (:data:`FOREIGN_PLAN`)."""
    owners = known_owners(conn, {p.run_id for p in plans}, {p.query_id for p in plans})
    kept: list[QueryPlan] = []
    foreign: list[int] = []
    for index, (plan, tenant) in enumerate(zip(plans, tenants, strict=True)):
        if (owners.get(plan.run_id) == tenant and owners.get("q:" + plan.query_id) == tenant
                and owners.get("qr:" + plan.run_id) == plan.query_id):
            kept.append(plan)
        else:
            foreign.append(index)
    if foreign:
        log.warning("left out %d plans of runs the history does not hold for their tenant",
                    len(foreign))
    return kept, foreign


def known_owners(conn: sa.Connection, run_ids: Iterable[str], query_ids: Iterable[str]
                  ) -> dict[str, str]:
    """run id -> tenant, ``a:``run id -> the app that reported it, ``qr:``run id -> its query,
    and ``q:``query id -> tenant, of the runs the history holds."""
    r = QueryRun.__table__.c
    owners: dict[str, str] = {}
    runs, queries = sorted(run_ids), sorted(query_ids)
    for start in range(0, len(runs), CHUNK):
        stmt = sa.select(r.run_id, r.tenant, r.app_name, r.query_id).where(
            among(conn, r.run_id, runs[start:start + CHUNK]))
        for run_id, tenant, app, query in conn.execute(stmt):
            owners[run_id], owners["a:" + run_id], owners["qr:" + run_id] = tenant, app, query
    for start in range(0, len(queries), CHUNK):
        stmt = sa.select(r.query_id, r.tenant).where(
            among(conn, r.query_id, queries[start:start + CHUNK]))
        for row in conn.execute(stmt.distinct()):
            owners.setdefault("q:" + row.query_id, row.tenant)
    return owners


def among(conn: sa.Connection, column: sa.ColumnElement[str], ids: list[str]
           ) -> sa.ColumnElement[bool]:
    """``column`` is one of ``ids``: on PostgreSQL one array parameter (``= ANY``), whose
    statement is the same text every time; an IN list of 500 parameters is rendered, sent and
    parsed again on every write, a sixth of the history writer's CPU per event (bench ceiling)."""
    if conn.dialect.name == "postgresql":
        return column == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.String)))
    return column.in_(ids)
