"""How far each collector replica has written its spool to the history (``replica_progress``).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

Stall and lost-run detection judge a run's silence by its last event in the history. Each replica
acknowledges events into a spool of its own and writes them later: while one replica's spool
drains (after a database outage), the runs whose events it holds look silent to the replica that
runs the job. Each replica now reports its pump's ``written_until`` here, and the jobs look no
further than the least of the live replicas' (``collector/replicas.py``).

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "replica_progress",
        sa.Column("replica", sa.String(), nullable=False),
        sa.Column("written_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("replica", name="pk_replica_progress"),
    )


def downgrade() -> None:
    op.drop_table("replica_progress")
