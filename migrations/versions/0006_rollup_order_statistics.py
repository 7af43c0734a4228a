"""Rollups carry order statistics: state rows at a bucket's first and last batch, batch-duration
p95; indexes for reading every query's hourly rollups over a time range.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

The History dashboard's fleet-wide panels (every query over days) read raw batch and operator
rows: 0.8-20 s at 10 M progress rows (docs/benchmarks.md). With these columns they read the hourly
rollups instead: growth per day from first/last, the hourly p95 from the rollup. The rollup rows
are written by the collector's job (or the listener's history sink), not on ingest, so the new
indexes cost nothing per progress event.

Existing rollup rows get NULL in the new columns until their bucket is recomputed (the job only
recomputes its recent lookback window); no backfill here, which would read every raw row still
kept while holding the tables' locks. Rows with resolution 'day' (new, no schema change) are
aggregated by the job from the hour rows; its first run after this upgrade backfills them once.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("query_rollups", "batch_duration_ms_p95", sa.Double()),
    ("operator_rollups", "num_rows_total_first", sa.BigInteger()),
    ("operator_rollups", "num_rows_total_last", sa.BigInteger()),
)
INDEXES = (
    ("ix_query_rollups_resolution_bucket_start", "query_rollups", ["resolution", "bucket_start"]),
    ("ix_query_rollups_resolution_batch_duration_ms_max", "query_rollups",
     ["resolution", "batch_duration_ms_max"]),
    ("ix_operator_rollups_resolution_bucket_start", "operator_rollups",
     ["resolution", "bucket_start"]),
)


def upgrade() -> None:
    for table, column, type_ in COLUMNS:
        # batch_alter_table: SQLite cannot drop columns in place (downgrade); a no-op wrapper on
        # PostgreSQL.
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column(column, type_, nullable=True))
    for name, table, columns in INDEXES:
        op.create_index(name, table, columns)


def downgrade() -> None:
    for name, table, _ in INDEXES:
        op.drop_index(name, table_name=table)
    for table, column, _ in reversed(COLUMNS):
        with op.batch_alter_table(table) as batch:
            batch.drop_column(column)
