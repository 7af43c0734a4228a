"""Indexes for the history's reads: batch and operator rows by time, rollups by query and time.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21

The History dashboard's panels over every query (and retention's deletes) select raw rows by
timestamp alone; the existing indexes lead with query_id, so PostgreSQL read the whole table
whatever the range. Rows arrive in time order, so these indexes only ever grow at their right
edge (the cheapest b-tree insert). The hourly rollups of one query were found through the primary
key (query_id, operator_index, resolution, bucket_start), reading all of the query's minute
rollups too; the rollups are written once a minute by the collector's job, not on ingest.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = (
    ("ix_batches_timestamp", "batches", ["timestamp"]),
    ("ix_operator_batches_timestamp", "operator_batches", ["timestamp"]),
    ("ix_operator_rollups_query_id_resolution_bucket_start", "operator_rollups",
     ["query_id", "resolution", "bucket_start"]),
)


def upgrade() -> None:
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in INDEXES:
        op.drop_index(name, table_name=table)
