"""Tables of the collector's scheduled jobs: rollups, stall marks, job leases.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _time(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _long(name: str) -> sa.Column:
    return sa.Column(name, sa.BigInteger(), nullable=False)


def _text(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.String(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "query_rollups",
        _text("query_id"),
        _text("resolution"),
        _time("bucket_start"),
        _long("batches"),
        _long("num_input_rows"),
        _long("batch_duration_ms_sum"),
        _long("batch_duration_ms_max"),
        sa.PrimaryKeyConstraint(
            "query_id", "resolution", "bucket_start", name="pk_query_rollups"
        ),
    )
    op.create_index("ix_query_rollups_bucket_start", "query_rollups", ["bucket_start"])
    op.create_table(
        "operator_rollups",
        _text("query_id"),
        sa.Column("operator_index", sa.Integer(), nullable=False),
        _text("resolution"),
        _time("bucket_start"),
        _text("operator_name"),
        _long("batches"),
        _long("num_rows_total_max"),
        sa.Column("num_rows_total_avg", sa.Double(), nullable=False),
        _long("num_rows_updated"),
        _long("num_rows_removed"),
        _long("num_rows_dropped_by_watermark"),
        _long("memory_used_bytes_max"),
        _long("all_updates_time_ms"),
        _long("all_removals_time_ms"),
        _long("commit_time_ms"),
        sa.PrimaryKeyConstraint(
            "query_id", "operator_index", "resolution", "bucket_start",
            name="pk_operator_rollups",
        ),
    )
    op.create_index("ix_operator_rollups_bucket_start", "operator_rollups", ["bucket_start"])
    op.create_table(
        "query_stalls",
        _text("run_id"),
        _time("detected_at"),
        _text("query_id"),
        _text("name", nullable=True),
        _text("app_name"),
        _text("app_id"),
        _time("last_event_at"),
        sa.Column("threshold_seconds", sa.Double(), nullable=False),
        _time("cleared_at", nullable=True),
        sa.PrimaryKeyConstraint("run_id", "detected_at", name="pk_query_stalls"),
    )
    op.create_index(
        "ix_query_stalls_query_id_detected_at", "query_stalls", ["query_id", "detected_at"]
    )
    op.create_table(
        "job_runs",
        _text("job"),
        _time("slot"),
        _text("replica"),
        _time("ran_at"),
        sa.PrimaryKeyConstraint("job", "slot", name="pk_job_runs"),
    )


def downgrade() -> None:
    for table in ("job_runs", "query_stalls", "operator_rollups", "query_rollups"):
        op.drop_table(table)
