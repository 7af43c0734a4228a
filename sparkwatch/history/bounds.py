"""Each run's batch bounds (``query_runs.first_batch_id``, ``last_batch_id``,
``last_progress_at``, migration 0013) brought up to the recent batches.

The history writer widens them as it writes each batch. A writer of a release before 0013 still
attached after the upgrade (a driver that migrated when it attached, an old collector replica
during a rolling update) writes batches and runs without them, and the queries and runs pages
read them, never ``batches``: without this they would stay short, or empty, for good. The
rollups pass (collector job or the listener's history sink) runs it over its lookback, one
grouped pass over the batches it reads anyway; every batch an older writer wrote after the
upgrade is within it while such writers run.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa

from sparkwatch.history.schema import Batch

# UPDATE ... FROM: PostgreSQL, and SQLite 3.33+ (whose fixed-width time text compares in order),
# as migration 0013's backfill. Only runs whose bounds the batches widen are written.
_WIDEN = """
UPDATE query_runs SET
    first_batch_id = CASE WHEN query_runs.first_batch_id IS NULL
        OR recent.lo < query_runs.first_batch_id THEN recent.lo
        ELSE query_runs.first_batch_id END,
    last_batch_id = CASE WHEN query_runs.last_batch_id IS NULL
        OR recent.hi > query_runs.last_batch_id THEN recent.hi
        ELSE query_runs.last_batch_id END,
    last_progress_at = CASE WHEN query_runs.last_progress_at IS NULL
        OR recent.latest > query_runs.last_progress_at THEN recent.latest
        ELSE query_runs.last_progress_at END
FROM (SELECT run_id, min(batch_id) AS lo, max(batch_id) AS hi, max(timestamp) AS latest
      FROM batches WHERE timestamp >= :since GROUP BY run_id) AS recent
WHERE query_runs.run_id = recent.run_id
  AND (query_runs.first_batch_id IS NULL OR recent.lo < query_runs.first_batch_id
       OR query_runs.last_batch_id IS NULL OR recent.hi > query_runs.last_batch_id
       OR query_runs.last_progress_at IS NULL OR recent.latest > query_runs.last_progress_at)
"""


def widen_from_recent(conn: sa.Connection, since: datetime) -> int:
    """Widen the bounds of every run with batches since ``since`` to hold them; how many runs
    were short of them (0 while every writer keeps them)."""
    # Bound as the column's type: SQLite compares the model's own text form of a time.
    stmt = sa.text(_WIDEN).bindparams(sa.bindparam("since", type_=Batch.__table__.c.timestamp.type))
    return conn.execute(stmt, {"since": since}).rowcount or 0
