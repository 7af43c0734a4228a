"""Run each scheduled job once per time slot across every collector replica on one database.

A job's run claims its slot by inserting ``(job, slot)`` into ``job_runs`` in the same transaction
as the job's work. The primary key lets one replica in: on PostgreSQL a second replica's insert
waits for the first transaction and then finds the row (skip) or, if the first failed and rolled
back, takes the slot itself. Stronger than a lock held while running, which would let a replica
whose timer fires just after the other finished run the same slot again.

A job runs at the replica's clock, but at the database's where the replica's is ahead of it by
more than :data:`~sparkwatch.history.lost.AHEAD_SLACK` (a clock that jumped ahead): its runs
claimed slots that far ahead, each then found taken by every other replica when their clocks came
to it (no replica ran the job for as long as the jumped one had), and ran the work at that time
(retention years ahead deleted every row). A clock ahead within the slack runs the slots a little
early, each still once; one behind runs past slots, taken already or harmlessly late.

A job may end early: :class:`JobStopped` when the collector stops (none starts once it is
stopping), :class:`Deferred` when it did what it could and leaves the rest to its next run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

import sqlalchemy as sa

from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.history.clock import bounded, database_now
from sparkwatch.history.rollups import claim_slot
from sparkwatch.summary import one_line

log = logging.getLogger(__name__)

Work = Callable[[sa.Connection, datetime], object]


class JobStopped(Exception):  # noqa: N818 - an outcome, as StopIteration
    """The collector is stopping: chunked work ends between two chunks (what it committed
    stays, the chunk in progress is rolled back), so that the process exits promptly."""


class Deferred(Exception):  # noqa: N818 - an outcome, not a fault
    """Raised by work after what it could do, which is committed: the rest waits for the next
    run (e.g. partition DDL that would have waited for another session's lock). Counted
    ``failed``; logged as a warning once per streak of deferred runs, the repeats at info."""


@runtime_checkable
class ChunkedWork(Protocol):
    """Work that may commit on its way (``conn.commit()``, e.g. one bounded delete at a time on a
    nearly full disk). Its first commit also commits the slot's claim: the slot is then this
    replica's even if a later part fails (the next slot carries on). ``stopping()`` true: it
    raises :class:`JobStopped` at its next commit."""

    def in_chunks(self, conn: sa.Connection, now: datetime,
                  stopping: Callable[[], bool]) -> object: ...


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    interval_seconds: float
    work: Work


def slot_of(now: datetime, interval_seconds: float) -> datetime:
    """The start of the interval ``now`` falls in, aligned to the epoch (same on every replica)."""
    epoch = now.timestamp()
    return datetime.fromtimestamp(epoch - epoch % interval_seconds, tz=UTC)


class LeasedRunner:
    def __init__(
        self,
        engine: sa.Engine,
        replica: str,
        metrics: SelfMetrics,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self._engine = engine
        self._replica = replica
        self._metrics = metrics
        self._clock = clock
        self._stopping = stopping
        self._deferred: set[str] = set()
        """Jobs whose last run was deferred (their next deferral is logged at info)."""
        self._ahead = False
        """Whether this replica's clock was last found ahead of the database's."""

    def run(self, job: Job) -> bool:
        """Run ``job`` for the current slot unless a replica already has; True if it ran here."""
        if self._stopping():
            return False  # scheduled just before the stop: the process is ending
        try:
            # Not engine.begin(): chunked work commits inside; what is left uncommitted when
            # it raises is rolled back as the connection closes.
            with self._engine.connect() as conn:
                now = self._now(conn)
                if not self._claim(conn, job, now):
                    conn.rollback()
                    self._metrics.job_runs.labels(job.name, "skipped").inc()
                    return False
                self._work(conn, job, now)
        except JobStopped:
            log.info("job %s stopped between two of its steps: the collector is stopping (what "
                     "it committed stays, the next run carries on)", job.name)
            return False
        except Deferred as exc:
            self._metrics.job_runs.labels(job.name, "failed").inc()
            level = logging.INFO if job.name in self._deferred else logging.WARNING
            self._deferred.add(job.name)
            log.log(level, "job %s deferred (will try again next interval): %s", job.name, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - a failed run leaves the slot free to retry
            self._metrics.job_runs.labels(job.name, "failed").inc()
            log.warning("job %s failed (will run again next interval): %s", job.name,
                        one_line(exc))
            return False
        if job.name in self._deferred:
            self._deferred.discard(job.name)
            log.info("job %s ran in full again", job.name)
        self._metrics.job_runs.labels(job.name, "ran").inc()
        return True

    def _work(self, conn: sa.Connection, job: Job, now: datetime) -> None:
        try:
            if isinstance(job.work, ChunkedWork):
                job.work.in_chunks(conn, now, self._stopping)
            else:
                job.work(conn, now)
        except Deferred:
            conn.commit()  # what the work did do stands
            raise
        conn.commit()

    def _now(self, conn: sa.Connection) -> datetime:
        """This replica's clock, or the database's where this one is ahead of it by more than
        :data:`~sparkwatch.history.lost.AHEAD_SLACK` (:mod:`sparkwatch.history.clock`)."""
        now, database = self._clock(), database_now(conn)
        if bounded(now, database) == now:
            if self._ahead:
                self._ahead = False
                log.info("this replica's clock is back in line with the database's")
            return now
        if not self._ahead:
            self._ahead = True
            log.warning("this replica's clock is %s ahead of the database's: its jobs run at "
                        "the database's time until it is back in line", now - database)
        return database

    def _claim(self, conn: sa.Connection, job: Job, now: datetime) -> bool:
        return claim_slot(conn, job.name, slot_of(now, job.interval_seconds), self._replica, now)
