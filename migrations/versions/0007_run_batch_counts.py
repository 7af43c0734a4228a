"""Each run keeps the number of its batches in the history.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

The queries page (``HistoryReader.queries``, ``GET /api/v1/queries``, ``sparkwatch history
queries``) showed each query's batch count by counting its rows in ``batches``: one index range
per query, so the page's cost grew with the history kept (a query triggering every 10 s has
60,000 batches in a week; 100 such queries made the page read 6 M index entries). The writer now
adds the batches it inserts to their run and retention subtracts the ones it deletes, so the page
reads one row per run.

The upgrade counts the existing batches once (one pass over ``batches``, grouped by run: about a
second per million rows). The downgrade drops the column; nothing else depends on it.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Both PostgreSQL and SQLite (3.33+) have UPDATE ... FROM; one grouped pass, not one count per run.
BACKFILL = """
UPDATE query_runs SET batches = counted.n
FROM (SELECT run_id, count(*) AS n FROM batches GROUP BY run_id) AS counted
WHERE query_runs.run_id = counted.run_id
"""


def upgrade() -> None:
    with op.batch_alter_table("query_runs") as batch:
        batch.add_column(
            sa.Column("batches", sa.BigInteger(), nullable=False, server_default=sa.text("0"))
        )
    op.execute(BACKFILL)


def downgrade() -> None:
    with op.batch_alter_table("query_runs") as batch:
        batch.drop_column("batches")
