"""Each run keeps its first and last batch id and its latest batch time.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29

The queries page (``HistoryReader.queries``, ``GET /api/v1/queries``, the console's overview)
read each query's last batch id and last progress time, and the runs page each run's first and
last batch id, as ``min``/``max`` over ``batches``: an index probe per query and per daily
partition of ``batches`` (migration 0010), so with 65 days kept one page of 100 queries made
13,000 probes and took 4.6 s. The writer now keeps the three figures on the run's row
(``query_runs.first_batch_id``, ``last_batch_id``, ``last_progress_at``: least and greatest of
every batch written, so replays and late batches change nothing), and those pages read the runs
only. Retention leaves them as they are (the bounds of what the run recorded; ``batches`` counts
the rows still held).

The upgrade fills them in from the batches already there in one grouped pass over ``batches``
(one UPDATE, the same on PostgreSQL and SQLite 3.33+, as 0007's); runs without batches keep
NULL. The downgrade drops the columns; nothing else depends on them.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# One grouped pass, not one min/max per run (UPDATE ... FROM: PostgreSQL, and SQLite 3.33+,
# where the times are the model's fixed-width text, so max() of them is the latest).
BACKFILL = """
UPDATE query_runs SET first_batch_id = bounds.first_batch_id,
    last_batch_id = bounds.last_batch_id, last_progress_at = bounds.last_progress_at
FROM (SELECT run_id, min(batch_id) AS first_batch_id, max(batch_id) AS last_batch_id,
             max(timestamp) AS last_progress_at
      FROM batches GROUP BY run_id) AS bounds
WHERE query_runs.run_id = bounds.run_id
"""

COLUMNS = ("first_batch_id", "last_batch_id", "last_progress_at")


def upgrade() -> None:
    with op.batch_alter_table("query_runs") as batch:
        batch.add_column(sa.Column("first_batch_id", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("last_batch_id", sa.BigInteger(), nullable=True))
        batch.add_column(
            sa.Column("last_progress_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(BACKFILL)


def downgrade() -> None:
    with op.batch_alter_table("query_runs") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
