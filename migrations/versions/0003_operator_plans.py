"""Operator identity from the executed plan: one row per run and state operator.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def _text(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.String(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "operator_plans",
        _text("run_id"),
        sa.Column("operator_index", sa.Integer(), nullable=False),
        _text("query_id"),
        sa.Column("read_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        _text("source"),
        sa.Column("note", sa.Text(), nullable=True),
        _text("operator_name"),
        _text("kind"),
        _text("node", nullable=True),
        sa.Column("operator_id", sa.Integer(), nullable=True),
        sa.Column("keys", _json(), nullable=False),
        _text("output_mode", nullable=True),
        _text("watermark_column", nullable=True),
        sa.Column("watermark_delay_ms", sa.BigInteger(), nullable=True),
        sa.Column("num_state_stores", sa.Integer(), nullable=True),
        _text("state_store_provider", nullable=True),
        sa.Column("checkpoint_location", sa.Text(), nullable=True),
        sa.Column("details", _json(), nullable=False),
        sa.Column("settings", _json(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "operator_index", name="pk_operator_plans"),
    )
    op.create_index(
        "ix_operator_plans_query_id_read_at", "operator_plans", ["query_id", "read_at"]
    )


def downgrade() -> None:
    op.drop_table("operator_plans")
