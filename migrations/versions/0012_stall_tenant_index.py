"""Stall marks indexed by (tenant, detected_at).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29

``GET /api/v1/stalls`` reads a tenant's newest marks (``ORDER BY detected_at DESC`` for one
tenant, or every tenant's): with only (query_id, detected_at) it was a sequential scan and a sort
of every tenant's marks. A tenant's read is now one ordered index range, stopping at its page.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_query_stalls_tenant_detected_at", "query_stalls",
                    ["tenant", "detected_at"])


def downgrade() -> None:
    op.drop_index("ix_query_stalls_tenant_detected_at", table_name="query_stalls")
