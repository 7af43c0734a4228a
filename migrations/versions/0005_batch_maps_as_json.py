"""Per-batch JSON maps as ``json`` instead of ``jsonb`` on PostgreSQL.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

The maps of every batch (custom metrics of each state operator, phase durations, observed
metrics, source offsets and metrics, sink metrics) are written once per batch and only ever read
back whole; nothing filters or indexes them by key. ``jsonb`` made PostgreSQL decompose every map
into its binary form on write, about half of the database's cost per progress event (measured
with the raw COPY floor of ``python -m bench ingest``, docs/benchmarks.md); ``json`` only checks
the text is valid JSON and stores it as sent. Reading a key in SQL still works (``->``, ``->>``).
The low-volume maps (run job tags, operator plans) stay ``jsonb``.

On PostgreSQL this rewrites the four per-batch tables (an ACCESS EXCLUSIVE lock for as long as
the copy takes: schedule it for a large history). SQLite has one JSON type: nothing to do.

Hand-written like 0001 (no model imports): tests/test_migrations.py checks head against
sparkwatch.history.schema on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = {
    "batches": ("duration_ms", "observed_metrics"),
    "operator_batches": ("custom_metrics",),
    "source_batches": ("start_offset", "end_offset", "latest_offset", "metrics"),
    "sink_batches": ("metrics",),
}


def _retype(to: str) -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    for table, columns in COLUMNS.items():
        # One ALTER TABLE per table: PostgreSQL rewrites it once for all its columns.
        changes = ", ".join(f'ALTER COLUMN "{c}" TYPE {to} USING "{c}"::{to}' for c in columns)
        op.execute(f'ALTER TABLE "{table}" {changes}')


def upgrade() -> None:
    _retype("json")


def downgrade() -> None:
    _retype("jsonb")
