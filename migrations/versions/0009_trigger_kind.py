"""The trigger of each run: its kind and interval (``run_triggers``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

Spark's events do not carry the trigger; the listener reads it from the JVM query with the plan
(``sparkwatch.plan.trigger``) and writes it here, one row per run whose trigger was read, also
for stateless runs (which have no ``operator_plans`` rows). Real-time mode (Spark 4.1+) runs
long batches by design: doctor and the alerts compare a run's batches against its own
interval.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "run_triggers",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("query_id", sa.String(), nullable=False),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trigger_kind", sa.String(), nullable=False),
        sa.Column("trigger_interval_ms", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_triggers"),
    )
    op.create_index("ix_run_triggers_query_id", "run_triggers", ["query_id"])


def downgrade() -> None:
    op.drop_table("run_triggers")
