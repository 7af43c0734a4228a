"""The scheduled jobs, on an APScheduler background scheduler.

Database jobs (retention, rollups, stall detection) are leased (:mod:`.leases`): they run once per
slot across replicas. Local jobs (evicting stale series from this replica's memory, refreshing its
copy of the stall marks) run on every replica, as each holds its own state.

Stopping (:meth:`JobScheduler.stop`): no job starts once the stop began, the running ones end
between two of their steps (:class:`~.leases.JobStopped`) and the stop waits for them a few
seconds at most. Each run has a daemon thread of its own, so that one still inside a statement
then is left to the process's exit, its transaction rolled back by the database: APScheduler's
thread pool was joined at exit, and SIGTERM during a long retention kept the process up until the
job ended (a pod's grace period then ends in SIGKILL).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.executors.base import BaseExecutor, run_job
from apscheduler.job import Job as ScheduledJob
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


class _DaemonThreads(BaseExecutor):  # type: ignore[misc]  # APScheduler has no type hints
    """Runs each job in a daemon thread of its own (see the module's doc)."""

    def _do_submit_job(self, job: ScheduledJob, run_times: list[datetime]) -> None:
        def run() -> None:
            try:
                events = run_job(job, job._jobstore_alias, run_times, self._logger.name)
            except BaseException as exc:  # noqa: BLE001 - reported as the pool reports it
                self._run_job_error(job.id, exc, exc.__traceback__)
            else:
                self._run_job_success(job.id, events)

        threading.Thread(target=run, name=f"collector-job-{job.id}", daemon=True).start()


class _SkippedRunsUnlogged(logging.Filter):
    """APScheduler warns at every tick a job is still running ("... skipped: maximum number of
    running instances reached"): 2-3 lines a second while a database lock held the jobs up.
    :class:`JobScheduler` says it once per overrun instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "maximum number of running instances" not in str(record.msg)


_APSCHEDULER_LOG = logging.getLogger("apscheduler.scheduler")
_APSCHEDULER_LOG.addFilter(_SkippedRunsUnlogged())


class JobScheduler(BackgroundScheduler):  # type: ignore[misc]  # APScheduler has no type hints
    """The collector's scheduler: jobs added by :meth:`every`, a bounded :meth:`stop`, and a job
    that runs past its next tick said once (when it overran and when it ended), not at every tick
    it skipped."""

    def __init__(self) -> None:
        super().__init__(timezone=UTC, executors={"default": _DaemonThreads()},
                         logger=_APSCHEDULER_LOG)
        self.stopping = threading.Event()
        self._changed = threading.Condition()
        self._began: dict[str, float] = {}
        """Job name to when its run began (monotonic)."""
        self._skipped: dict[str, int] = {}
        """Ticks skipped during each job's current run (only jobs that overran)."""
        self.add_listener(self._overran, EVENT_JOB_MAX_INSTANCES)

    def every(self, seconds: float, func: Callable[[], object], name: str) -> None:
        """Run ``func`` every ``seconds``, first a second from now, never twice at once."""
        soon = datetime.now(UTC) + timedelta(seconds=1)
        self.add_job(self._guarded(name, func), IntervalTrigger(seconds=seconds, timezone=UTC),
                     id=name, name=name, max_instances=1, coalesce=True, next_run_time=soon)

    def stop(self, timeout: float) -> bool:
        """Start no more jobs and wait up to ``timeout`` for the running ones (which end at their
        next step); True when none is left running."""
        self.stopping.set()
        if self.running:
            self.shutdown(wait=False)
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._began and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
            still = sorted(self._began)
        if still:
            log.warning("jobs %s still running after %.0f s of stopping: left to the exit (what "
                        "they did not commit is rolled back)", ", ".join(still), timeout)
        return not still

    def _guarded(self, name: str, func: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            if self.stopping.is_set():
                return  # submitted just before the stop
            with self._changed:
                self._began[name] = time.monotonic()
            try:
                func()
            finally:
                self._ended(name)

        return run

    def _ended(self, name: str) -> None:
        with self._changed:
            began = self._began.pop(name, time.monotonic())
            skipped = self._skipped.pop(name, 0)
            self._changed.notify_all()
        if skipped:
            log.info("job %s ended after %.0f s; %d of its runs were skipped meanwhile", name,
                     time.monotonic() - began, skipped)

    def _overran(self, event: JobSubmissionEvent) -> None:
        with self._changed:
            began = self._began.get(event.job_id)
            if began is None:
                return
            skipped = self._skipped.get(event.job_id, 0) + 1
            self._skipped[event.job_id] = skipped
        if skipped == 1:
            log.warning("job %s still running after %.0f s, past its next run: its runs are "
                        "skipped until it ends", event.job_id, time.monotonic() - began)


def start_scheduler(settings: CollectorSettings, evict: Callable[[], int]) -> JobScheduler:
    """The scheduler with the local eviction job; the history's jobs come with
    :func:`add_history_jobs` once the schema is there."""
    scheduler = JobScheduler()
    scheduler.every(settings.evict_interval_seconds, evict, "evict")
    scheduler.start()
    return scheduler


def add_history_jobs(scheduler: JobScheduler, settings: CollectorSettings,
                     runner: LeasedRunner, engine: sa.Engine, board: StallBoard,
                     written_until: WrittenUntil | None = None) -> None:
    """The leased jobs, the stall board's refresh and this replica's progress report (see
    :mod:`sparkwatch.history.replicas`), first run a second from now. Added after
    the schema upgrade: at a fresh start they ran before it and each failed once on missing
    tables."""
    if written_until is not None:  # every replica, jobs or not: its backlog holds the jobs back
        scheduler.every(REPORT_SECONDS, _report(engine, settings.replica, written_until),
                        "replica-progress")
    if not settings.jobs_enabled:
        return
    for job in leased_jobs(settings, written_until):
        scheduler.every(job.interval_seconds, _bind(runner, job), job.name)
    scheduler.every(min(settings.stall_check_seconds, 15.0), _refresh(board, engine),
                    "stall-board")


def _bind(runner: LeasedRunner, job: Job) -> Callable[[], object]:
    return lambda: runner.run(job)


REPORT_SECONDS = 5.0
"""How often a replica reports its ``written_until``: another replica's stall detection lags
by up to this (see :mod:`sparkwatch.history.replicas`)."""


def _report(engine: sa.Engine, replica: str, written_until: WrittenUntil
            ) -> Callable[[], None]:
    def report() -> None:
        try:
            with engine.begin() as conn:
                replicas.report(conn, replica, written_until(), datetime.now(UTC))
        except Exception as exc:  # noqa: BLE001 - the jobs wait for a report older than this
            log.debug("replica progress report failed: %s", exc)

    return report


def _refresh(board: StallBoard, engine: sa.Engine) -> Callable[[], None]:
    def refresh() -> None:
        try:
            board.refresh(engine)
        except Exception as exc:  # noqa: BLE001 - keep the last known marks while the DB is down
            log.debug("stall board refresh failed: %s", exc)

    return refresh
