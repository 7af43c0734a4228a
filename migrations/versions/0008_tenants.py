"""Runs and stall marks belong to a tenant.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26

The collector serves many tenants (a token's tenant, see docs/security.md); runs and stall marks
are now written and read within one. Every existing row belongs to the tenant ``default``, the
tenant of a token configured without one: a single-token collector reads what it wrote before.
Batches, operator rows and rollups are reached through their run or query, whose ids a tenant
owns (first use), so they need no column of their own.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("query_runs", "query_stalls")
INDEXES = (("ix_query_runs_tenant_query_id", "query_runs", ["tenant", "query_id"]),)


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("tenant", sa.String(), nullable=False,
                                       server_default=sa.text("'default'")))
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in INDEXES:
        op.drop_index(name, table_name=table)
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("tenant")
