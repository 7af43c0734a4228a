"""Run each scheduled job once per time slot across every collector replica on one database.

A job's run claims its slot by inserting ``(job, slot)`` into ``job_runs`` in the same transaction
as the job's work. The primary key lets one replica in: on PostgreSQL a second replica's insert
waits for the first transaction and then finds the row (skip) or, if the first failed and rolled
back, takes the slot itself. Stronger than a lock held while running, which would let a replica
whose timer fires just after the other finished run the same slot again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

import sqlalchemy as sa

from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.history.rollups import claim_slot
from sparkwatch.summary import one_line

log = logging.getLogger(__name__)

Work = Callable[[sa.Connection, datetime], object]


@runtime_checkable
class ChunkedWork(Protocol):
    """Work that may commit on its way (``conn.commit()``, e.g. one bounded delete at a time on a
    nearly full disk). Its first commit also commits the slot's claim: the slot is then this
    replica's even if a later part fails (the next slot carries on)."""

    def in_chunks(self, conn: sa.Connection, now: datetime) -> object: ...


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
    ) -> None:
        self._engine = engine
        self._replica = replica
        self._metrics = metrics
        self._clock = clock

    def run(self, job: Job) -> bool:
        """Run ``job`` for the current slot unless a replica already has; True if it ran here."""
        now = self._clock()
        try:
            # Not engine.begin(): chunked work commits inside; what is left uncommitted when
            # it raises is rolled back as the connection closes.
            with self._engine.connect() as conn:
                if not self._claim(conn, job, now):
                    conn.rollback()
                    self._metrics.job_runs.labels(job.name, "skipped").inc()
                    return False
                if isinstance(job.work, ChunkedWork):
                    job.work.in_chunks(conn, now)
                else:
                    job.work(conn, now)
                conn.commit()
        except Exception as exc:  # noqa: BLE001 - a failed run leaves the slot free to retry
            self._metrics.job_runs.labels(job.name, "failed").inc()
            log.warning("job %s failed (will run again next interval): %s", job.name,
                        one_line(exc))
            return False
        self._metrics.job_runs.labels(job.name, "ran").inc()
        return True

    def _claim(self, conn: sa.Connection, job: Job, now: datetime) -> bool:
        return claim_slot(conn, job.name, slot_of(now, job.interval_seconds), self._replica, now)
