"""History tables: query runs, batches, and per-batch state operators, sources and sink.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Hand-written and explicit: a migration describes the schema at its revision, so it must not import
the models (they describe the newest schema). tests/test_migrations.py checks that head matches
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine:
    return sa.JSON(none_as_null=True).with_variant(
        postgresql.JSONB(none_as_null=True), "postgresql"
    )


def _time(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _long(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.BigInteger(), nullable=nullable)


def _rate(name: str) -> sa.Column:
    return sa.Column(name, sa.Double(), nullable=True)


def _batch_key() -> list[sa.Column]:
    return [
        sa.Column("run_id", sa.String(), nullable=False),
        _long("batch_id"),
    ]


def _denormalized() -> list[sa.Column]:
    return [sa.Column("query_id", sa.String(), nullable=False), _time("timestamp")]


def _batch_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["run_id", "batch_id"],
        ["batches.run_id", "batches.batch_id"],
        name=f"fk_{table}_run_id_batches",
        ondelete="CASCADE",
    )


def _create_query_runs() -> None:
    op.create_table(
        "query_runs",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("query_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=True),
        sa.Column("app_name", sa.String(), nullable=False),
        sa.Column("app_id", sa.String(), nullable=False),
        sa.Column("spark_version", sa.String(), nullable=False),
        sa.Column("job_tags", _json(), nullable=True),
        _time("started_at", nullable=True),
        _time("ended_at", nullable=True),
        sa.Column("exception", sa.Text(), nullable=True),
        sa.Column("error_class", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        _time("last_event_at"),
        sa.PrimaryKeyConstraint("run_id", name="pk_query_runs"),
    )
    op.create_index(
        "ix_query_runs_query_id_last_event_at", "query_runs", ["query_id", "last_event_at"]
    )


def _create_batches() -> None:
    op.create_table(
        "batches",
        *_batch_key(),
        *_denormalized(),
        _long("batch_duration_ms"),
        _long("num_input_rows"),
        _rate("input_rows_per_second"),
        _rate("processed_rows_per_second"),
        _long("add_batch_ms", nullable=True),
        _long("get_batch_ms", nullable=True),
        _long("latest_offset_ms", nullable=True),
        _long("get_offset_ms", nullable=True),
        _long("query_planning_ms", nullable=True),
        _long("wal_commit_ms", nullable=True),
        _long("commit_offsets_ms", nullable=True),
        _long("trigger_execution_ms", nullable=True),
        sa.Column("duration_ms", _json(), nullable=False),
        _time("event_time_min", nullable=True),
        _time("event_time_max", nullable=True),
        _time("event_time_avg", nullable=True),
        _time("watermark", nullable=True),
        sa.Column("observed_metrics", _json(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "batch_id", name="pk_batches"),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["query_runs.run_id"],
            name="fk_batches_run_id_query_runs",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_batches_query_id_timestamp", "batches", ["query_id", "timestamp"])


def _create_operator_batches() -> None:
    op.create_table(
        "operator_batches",
        *_batch_key(),
        sa.Column("operator_index", sa.Integer(), nullable=False),
        *_denormalized(),
        sa.Column("operator_name", sa.String(), nullable=False),
        _long("num_rows_total"),
        _long("num_rows_updated"),
        _long("all_updates_time_ms"),
        _long("num_rows_removed"),
        _long("all_removals_time_ms"),
        _long("commit_time_ms"),
        _long("memory_used_bytes"),
        _long("num_rows_dropped_by_watermark"),
        _long("num_shuffle_partitions"),
        _long("num_state_store_instances"),
        sa.Column("custom_metrics", _json(), nullable=False),
        sa.PrimaryKeyConstraint(
            "run_id", "batch_id", "operator_index", name="pk_operator_batches"
        ),
        _batch_fk("operator_batches"),
    )
    op.create_index(
        "ix_operator_batches_query_id_operator_index_timestamp",
        "operator_batches",
        ["query_id", "operator_index", "timestamp"],
    )


def _create_source_batches() -> None:
    op.create_table(
        "source_batches",
        *_batch_key(),
        sa.Column("source_index", sa.Integer(), nullable=False),
        *_denormalized(),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("start_offset", _json(), nullable=True),
        sa.Column("end_offset", _json(), nullable=True),
        sa.Column("latest_offset", _json(), nullable=True),
        _long("num_input_rows"),
        _rate("input_rows_per_second"),
        _rate("processed_rows_per_second"),
        sa.Column("metrics", _json(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "batch_id", "source_index", name="pk_source_batches"),
        _batch_fk("source_batches"),
    )
    op.create_index(
        "ix_source_batches_query_id_source_index_timestamp",
        "source_batches",
        ["query_id", "source_index", "timestamp"],
    )


def _create_sink_batches() -> None:
    op.create_table(
        "sink_batches",
        *_batch_key(),
        *_denormalized(),
        sa.Column("description", sa.Text(), nullable=False),
        _long("num_output_rows"),
        sa.Column("metrics", _json(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "batch_id", name="pk_sink_batches"),
        _batch_fk("sink_batches"),
    )
    op.create_index(
        "ix_sink_batches_query_id_timestamp", "sink_batches", ["query_id", "timestamp"]
    )


def upgrade() -> None:
    _create_query_runs()
    _create_batches()
    _create_operator_batches()
    _create_source_batches()
    _create_sink_batches()


def downgrade() -> None:
    # Children first: they reference batches, which references query_runs.
    for table in ("sink_batches", "source_batches", "operator_batches", "batches", "query_runs"):
        op.drop_table(table)
