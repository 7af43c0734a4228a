"""The plans of the runs still running, read back from the history with their app and tenant.

A collector restarted while drivers keep pushing would otherwise name their operators from the
progress alone until each run restarts (a listener pushes a run's plan once, when it reads it)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from sparkwatch.history.reader import plans_from_rows
from sparkwatch.history.schema import OperatorPlan, QueryRun, RunTrigger
from sparkwatch.model.events import AppInfo
from sparkwatch.plan.model import QueryPlan


@dataclass(frozen=True, slots=True)
class RunningPlan:
    tenant: str
    app: AppInfo
    plan: QueryPlan


def running_plans(conn: sa.Connection, limit: int) -> list[RunningPlan]:
    """The plan of each running run, the ``limit`` runs heard from last (a restarted collector
    keeps at most its query quota in memory anyway)."""
    r = QueryRun.__table__.c
    latest = (sa.select(r.run_id).where(r.status == "running")
              .order_by(r.last_event_at.desc()).limit(limit).subquery())
    runs = conn.execute(
        sa.select(r.run_id, r.tenant, r.app_id, r.app_name, r.spark_version)
        .where(r.run_id.in_(sa.select(latest.c.run_id)))
    ).all()
    if not runs:
        return []
    by_run = {row.run_id: row for row in runs}
    p, t = OperatorPlan.__table__.c, RunTrigger.__table__.c
    plan_rows = conn.execute(
        sa.select(OperatorPlan.__table__).where(p.run_id.in_(sa.select(latest.c.run_id)))
        .order_by(p.read_at.desc(), p.operator_index)
    ).all()
    trigger_rows = conn.execute(
        sa.select(RunTrigger.__table__).where(t.run_id.in_(sa.select(latest.c.run_id)))
    ).all()
    plans = plans_from_rows([dict(row._mapping) for row in plan_rows],
                            [dict(row._mapping) for row in trigger_rows])
    out = []
    for plan in plans:
        run = by_run.get(plan.run_id)
        if run is None:  # the run ended between the two reads
            continue
        app = AppInfo(name=run.app_name, id=run.app_id, spark_version=run.spark_version)
        out.append(RunningPlan(run.tenant, app, plan))
    return out
