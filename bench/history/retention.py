"""Times what retention does to a partitioned history (PostgreSQL, migration 0010): dropping the
oldest day's partitions (with the run batch counts' update) and creating the next days ahead.

Each is timed in its own transaction, which is then rolled back so the population stays whole
and reusable: a DROP TABLE's commit only unlinks the files, the work timed here is the rest.
"""

from __future__ import annotations

import time
from datetime import datetime

import sqlalchemy as sa

from sparkwatch.history import partitions
from sparkwatch.history.engine import parse_url


def measure(url: str, end: datetime, repetitions: int = 3) -> str:
    engine = sa.create_engine(parse_url(url))
    try:
        with engine.connect() as conn:
            if not partitions.is_partitioned(conn):
                return "- retention: the history is not partitioned (no day to drop)"
            days = sorted(partitions.existing_days(conn, "batches"))
            # The oldest full day: the first partition (made a day early) is empty, the second
            # holds only the population's first hours.
            day = days[min(2, len(days) - 1)]
            rows = int(conn.execute(sa.text(
                f"SELECT count(*) FROM {partitions.partition_name('operator_batches', day)}"))
                .scalar_one())
        drops, aheads = [], []
        for _ in range(repetitions):
            with engine.connect() as conn:
                partitions.drop_before(conn, day)  # the older (partial) days, not timed
                started = time.perf_counter()
                removed = partitions.drop_before(conn, day + partitions.DAY)
                drops.append(time.perf_counter() - started)
                conn.rollback()
            with engine.connect() as conn:
                started = time.perf_counter()
                partitions.ensure_ahead(conn, end + 30 * partitions.DAY)
                aheads.append(time.perf_counter() - started)
                conn.rollback()
    finally:
        engine.dispose()
    return (f"- retention: dropping the day {day:%Y-%m-%d} ({removed['batches']:,} batches, "
            f"{rows:,} operator rows; 4 tables, run batch counts updated) took "
            f"{_range(drops)} s; creating the {partitions.DAYS_AHEAD + 1} days' partitions ahead "
            f"(16 tables) {_range(aheads)} s ({repetitions} runs each, rolled back)")


def _range(seconds: list[float]) -> str:
    low, high = min(seconds), max(seconds)
    return f"{low:.3f}" if f"{low:.3f}" == f"{high:.3f}" else f"{low:.3f}–{high:.3f}"
