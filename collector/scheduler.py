"""The scheduled jobs, on an APScheduler background scheduler.

Database jobs (retention, rollups, stall detection) are leased (:mod:`.leases`): they run once per
slot across replicas. Local jobs (evicting stale series from this replica's memory, refreshing its
copy of the stall marks) run on every replica, as each holds its own state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from sparkwatch.collector.config import CollectorSettings
from sparkwatch.collector.leases import Job, LeasedRunner
from sparkwatch.collector.retention import Retention
from sparkwatch.collector.rollups import Rollups
from sparkwatch.collector.stalls import LostRuns, StallBoard, StallDetection, WrittenUntil
from sparkwatch.history import replicas

log = logging.getLogger(__name__)


def leased_jobs(settings: CollectorSettings, written_until: WrittenUntil | None = None
                ) -> list[Job]:
    """``written_until``: this replica's history pump's (the others' come from
    ``replica_progress``, see :func:`add_history_jobs`)."""
    return [
        Job("retention", settings.retention_interval_seconds,
            Retention(settings.retention_days, settings.rollup_retention_days)),
        Job("rollups", settings.rollup_interval_seconds,
            Rollups(settings.rollup_lookback_seconds)),
        Job("stalls", settings.stall_check_seconds,
            StallDetection(settings.stall_intervals, settings.stall_min_seconds,
                           settings.retention_days, written_until, settings.replica)),
        Job("lost-runs", settings.stall_check_seconds,
            LostRuns(settings.retention_days * 86_400.0, written_until, settings.replica)),
    ]


def start_scheduler(settings: CollectorSettings, evict: Callable[[], int]) -> BackgroundScheduler:
    """The scheduler with the local eviction job; the history's jobs come with
    :func:`add_history_jobs` once the schema is there."""
    scheduler = BackgroundScheduler(timezone=UTC)
    _every(scheduler, settings.evict_interval_seconds, evict, "evict")
    scheduler.start()
    return scheduler


def add_history_jobs(scheduler: BackgroundScheduler, settings: CollectorSettings,
                     runner: LeasedRunner, engine: sa.Engine, board: StallBoard,
                     written_until: WrittenUntil | None = None) -> None:
    """The leased jobs, the stall board's refresh and this replica's progress report (see
    :mod:`sparkwatch.history.replicas`), first run a second from now. Added after
    the schema upgrade: at a fresh start they ran before it and each failed once on missing
    tables."""
    if written_until is not None:  # every replica, jobs or not: its backlog holds the jobs back
        _every(scheduler, REPORT_SECONDS, _report(engine, settings.replica, written_until),
               "replica-progress")
    if not settings.jobs_enabled:
        return
    for job in leased_jobs(settings, written_until):
        _every(scheduler, job.interval_seconds, _bind(runner, job), job.name)
    _every(scheduler, min(settings.stall_check_seconds, 15.0), _refresh(board, engine),
           "stall-board")


def _every(scheduler: BackgroundScheduler, seconds: float, func: object, name: str) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=1)
    scheduler.add_job(func, IntervalTrigger(seconds=seconds, timezone=UTC), id=name, name=name,
                      max_instances=1, coalesce=True, next_run_time=soon)


def _bind(runner: LeasedRunner, job: Job) -> object:
    return lambda: runner.run(job)


REPORT_SECONDS = 5.0
"""How often a replica reports its ``written_until``: another replica's stall detection lags
by up to this (see :mod:`sparkwatch.history.replicas`)."""


def _report(engine: sa.Engine, replica: str, written_until: WrittenUntil) -> object:
    def report() -> None:
        try:
            with engine.begin() as conn:
                replicas.report(conn, replica, written_until(), datetime.now(UTC))
        except Exception as exc:  # noqa: BLE001 - the jobs wait for a report older than this
            log.debug("replica progress report failed: %s", exc)

    return report


def _refresh(board: StallBoard, engine: sa.Engine) -> object:
    def refresh() -> None:
        try:
            board.refresh(engine)
        except Exception as exc:  # noqa: BLE001 - keep the last known marks while the DB is down
            log.debug("stall board refresh failed: %s", exc)

    return refresh
