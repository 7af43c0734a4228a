"""The history tables, as typed SQLAlchemy 2 models.

Layout: one row per query run, one per progress batch, and one per state operator / source / sink
of that batch. The child rows repeat ``query_id`` and the batch ``timestamp`` so that time-range
queries for one query or one operator (Grafana panels, retention, rollups) hit one index with no
join. Keys are Spark's own ids, which makes every write idempotent on (run_id, batch_id, ...).

Spark ``Long`` fields are BigInteger; JSON maps are JSONB on PostgreSQL, but for the per-batch
maps, which are plain ``json`` (written once, read back whole: migration 0005). Migrations are
written by hand in ``migrations/versions``; a test asserts they create exactly these tables.

On PostgreSQL the four per-batch tables are partitioned by day on ``timestamp`` (migration 0010,
:mod:`sparkwatch.history.partitions`): there their primary keys also hold ``timestamp`` (PostgreSQL
requires the partition key in every unique key) and the children have no foreign key to
``batches`` (a day of each table is dropped together instead). SQLite keeps the layout below.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedColumn, mapped_column

from sparkwatch.history.columns import UtcDateTime, batch_json_type, json_type
from sparkwatch.history.partitions import is_partition_name
from sparkwatch.model.fields import OPERATOR_FIELDS, OperatorField
from sparkwatch.model.tenant import DEFAULT_TENANT

# The migration (migrations/versions) that creates exactly these tables; a test keeps them in step.
SCHEMA_REVISION = "0013"
# A name of our own: the history may share a PostgreSQL database with other Alembic projects.
VERSION_TABLE = "sparkwatch_alembic_version"

# Deterministic constraint names, so migrations can name what they create and drop.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RUNNING = "running"
TERMINATED = "terminated"
FAILED = "failed"
LOST = "lost"
"""A run whose driver stopped reporting without a terminated event (:mod:`.lost`)."""


class Base(DeclarativeBase):
    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UtcDateTime(),
        int: sa.BigInteger(),
        float: sa.Double(),
        str: sa.String(),
        dict[str, Any]: json_type(),
        Any: json_type(),
    }


def _field_column(f: OperatorField) -> MappedColumn[Any]:
    """The column of an operator field: NOT NULL, of the type ``Mapped[<its type>]`` gives."""
    return mapped_column(cast(sa.types.TypeEngine[Any], Base.type_annotation_map[f.type]),
                         nullable=False)


def _batch_fk() -> sa.ForeignKeyConstraint:
    # CASCADE so that retention deletes batches and their children go with them. SQLite only:
    # PostgreSQL's partitioned batches have no unique (run_id, batch_id) to refer to (0010).
    return sa.ForeignKeyConstraint(
        ["run_id", "batch_id"], ["batches.run_id", "batches.batch_id"], ondelete="CASCADE"
    ).ddl_if(dialect="sqlite")


def _tenant_column() -> MappedColumn[str]:
    """The tenant of runs and stall marks (migration 0008): rows from before it, and rows
    written without a tenant, belong to the default one; the same column in both tables."""
    return mapped_column(server_default=sa.text("'default'"), default=DEFAULT_TENANT)


_KEY_ORDER, _INDEX_ORDER, _WHERE_ORDER = -3, -2, -1


class _BatchChild:
    """The columns every child row of a batch starts with: the batch's key, then (after the
    child's own index, if any: ``_INDEX_ORDER``) the repeated ``query_id`` and ``timestamp``.

    ``sort_order`` keeps that column order (and so the primary key's) in every child table.
    """

    run_id: Mapped[str] = mapped_column(primary_key=True, sort_order=_KEY_ORDER)
    batch_id: Mapped[int] = mapped_column(
        primary_key=True, autoincrement=False, sort_order=_KEY_ORDER
    )
    query_id: Mapped[str] = mapped_column(sort_order=_WHERE_ORDER)
    timestamp: Mapped[datetime] = mapped_column(sort_order=_WHERE_ORDER)


def in_comparison(obj: Any, name: str | None, type_: str, reflected: bool,
                  compare_to: Any) -> bool:
    """Alembic's ``include_object`` for comparing a database with these models: a partition is
    part of its parent, and the children's keys to ``batches`` exist on SQLite only."""
    if type_ == "table" and name is not None and is_partition_name(name):
        return False
    return not (type_ == "foreign_key_constraint" and obj.referred_table.name == "batches")


class QueryRun(Base):
    """One start of a query (``runId`` changes on every restart, ``id`` does not)."""

    __tablename__ = "query_runs"
    __table_args__ = (sa.Index(None, "query_id", "last_event_at"),
                      sa.Index(None, "tenant", "query_id"))

    run_id: Mapped[str] = mapped_column(primary_key=True)
    # The tenant whose token wrote the run (migration 0008); its run and query ids are its own.
    tenant: Mapped[str] = _tenant_column()
    query_id: Mapped[str]
    name: Mapped[str | None]
    app_name: Mapped[str]
    app_id: Mapped[str]
    spark_version: Mapped[str]
    job_tags: Mapped[Any | None]
    # Null when the listener attached after the query started (no QueryStarted seen).
    started_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]
    exception: Mapped[str | None] = mapped_column(sa.Text)
    error_class: Mapped[str | None]
    status: Mapped[str]
    last_event_at: Mapped[datetime]
    # Rows of this run in ``batches``: the writer adds what it inserts, retention subtracts what
    # it deletes, so listing queries reads no batch rows (migration 0007).
    batches: Mapped[int] = mapped_column(server_default=sa.text("0"), default=0)
    # The run's first and last batch ids and its latest batch time, as the writer recorded them
    # (migration 0013): least and greatest of every batch it was given, whatever the order, so a
    # replay or a late batch never moves them inwards. Listing queries and runs reads them here,
    # not from ``batches`` (one probe per partition each). Retention leaves them as they are:
    # they say which batches the run recorded, while ``batches`` counts the rows still held
    # (a run whose old days were dropped keeps its first_batch_id; one with none left keeps all
    # three). Null until the run's first batch.
    first_batch_id: Mapped[int | None]
    last_batch_id: Mapped[int | None]
    last_progress_at: Mapped[datetime | None]


class Batch(Base):
    """One ``StreamingQueryProgress``."""

    __tablename__ = "batches"
    # timestamp alone: fleet-wide time ranges (History dashboard, retention); migration 0004.
    __table_args__ = (sa.Index(None, "query_id", "timestamp"), sa.Index(None, "timestamp"))

    run_id: Mapped[str] = mapped_column(
        sa.ForeignKey("query_runs.run_id", ondelete="CASCADE"), primary_key=True
    )
    batch_id: Mapped[int] = mapped_column(primary_key=True, autoincrement=False)
    query_id: Mapped[str]
    timestamp: Mapped[datetime]
    batch_duration_ms: Mapped[int]
    num_input_rows: Mapped[int]
    input_rows_per_second: Mapped[float | None]
    processed_rows_per_second: Mapped[float | None]
    # The phases Spark reports today as columns (null when a trigger lacks one); the whole map too.
    add_batch_ms: Mapped[int | None]
    get_batch_ms: Mapped[int | None]
    latest_offset_ms: Mapped[int | None]
    get_offset_ms: Mapped[int | None]
    query_planning_ms: Mapped[int | None]
    wal_commit_ms: Mapped[int | None]
    commit_offsets_ms: Mapped[int | None]
    trigger_execution_ms: Mapped[int | None]
    duration_ms: Mapped[dict[str, Any]] = mapped_column(batch_json_type())
    event_time_min: Mapped[datetime | None]
    event_time_max: Mapped[datetime | None]
    event_time_avg: Mapped[datetime | None]
    watermark: Mapped[datetime | None]
    observed_metrics: Mapped[dict[str, Any]] = mapped_column(batch_json_type())


class OperatorBatch(_BatchChild, Base):
    """One ``StateOperatorProgress``; ``operator_index`` is its position in the plan."""

    __tablename__ = "operator_batches"
    __table_args__ = (
        _batch_fk(),
        sa.Index(None, "query_id", "operator_index", "timestamp"),
        sa.Index(None, "timestamp"),
    )

    operator_index: Mapped[int] = mapped_column(
        sa.Integer, primary_key=True, autoincrement=False, sort_order=_INDEX_ORDER
    )
    operator_name: Mapped[str]
    # One column per field of the table, named by its attribute (read through __table__.c,
    # so no typed attribute is needed); in the class namespace, so before custom_metrics.
    vars().update({f.attr: _field_column(f) for f in OPERATOR_FIELDS})
    # Whole, unknown keys included: new keys arrive with almost every Spark release.
    custom_metrics: Mapped[dict[str, Any]] = mapped_column(batch_json_type())


class SourceBatch(_BatchChild, Base):
    """One source of a batch; offsets are whatever JSON the source reports."""

    __tablename__ = "source_batches"
    __table_args__ = (
        _batch_fk(),
        sa.Index(None, "query_id", "source_index", "timestamp"),
    )

    source_index: Mapped[int] = mapped_column(
        sa.Integer, primary_key=True, autoincrement=False, sort_order=_INDEX_ORDER
    )
    description: Mapped[str] = mapped_column(sa.Text)
    start_offset: Mapped[Any | None] = mapped_column(batch_json_type())
    end_offset: Mapped[Any | None] = mapped_column(batch_json_type())
    latest_offset: Mapped[Any | None] = mapped_column(batch_json_type())
    num_input_rows: Mapped[int]
    input_rows_per_second: Mapped[float | None]
    processed_rows_per_second: Mapped[float | None]
    metrics: Mapped[dict[str, Any]] = mapped_column(batch_json_type())


class SinkBatch(_BatchChild, Base):
    """The sink of a batch (absent when Spark reports none)."""

    __tablename__ = "sink_batches"
    __table_args__ = (
        _batch_fk(),
        sa.Index(None, "query_id", "timestamp"),
    )

    description: Mapped[str] = mapped_column(sa.Text)
    # -1 for V1 sinks, which do not report it.
    num_output_rows: Mapped[int]
    metrics: Mapped[dict[str, Any]] = mapped_column(batch_json_type())


# --- rollups: the collector's job or the listener's history sink (migration 0002) -------------

MINUTE = "minute"
HOUR = "hour"
# Day rollups are aggregated from the hour rollups (not raw rows): exact for counts, sums, maxima
# and first/last; no p95 (a day's percentile needs its raw batches).
DAY = "day"


class QueryRollup(Base):
    """Per-query aggregates of ``batches`` over one minute or hour, kept longer than raw rows."""

    __tablename__ = "query_rollups"
    # (resolution, bucket_start): every query's hours in a range (History dashboard, migration
    # 0006); (resolution, batch_duration_ms_max): the slowest hours first ("Slowest batches").
    __table_args__ = (
        sa.Index(None, "bucket_start"),
        sa.Index(None, "resolution", "bucket_start"),
        sa.Index(None, "resolution", "batch_duration_ms_max"),
    )

    query_id: Mapped[str] = mapped_column(primary_key=True)
    resolution: Mapped[str] = mapped_column(primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(primary_key=True)
    batches: Mapped[int]
    num_input_rows: Mapped[int]
    batch_duration_ms_sum: Mapped[int]
    batch_duration_ms_max: Mapped[int]
    # percentile_cont(0.95) of the bucket's batch durations (migration 0006; NULL in buckets
    # computed before it and not recomputed since).
    batch_duration_ms_p95: Mapped[float | None]


class OperatorRollup(Base):
    """Per-operator aggregates of ``operator_batches`` over one minute or hour."""

    __tablename__ = "operator_rollups"
    # (query_id, resolution, bucket_start): one query's hourly rollups without its minute ones.
    __table_args__ = (
        sa.Index(None, "bucket_start"),
        sa.Index(None, "query_id", "resolution", "bucket_start"),
        sa.Index(None, "resolution", "bucket_start"),
    )

    query_id: Mapped[str] = mapped_column(primary_key=True)
    operator_index: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    resolution: Mapped[str] = mapped_column(primary_key=True)
    bucket_start: Mapped[datetime] = mapped_column(primary_key=True)
    operator_name: Mapped[str]
    batches: Mapped[int]
    num_rows_total_max: Mapped[int]
    num_rows_total_avg: Mapped[float]
    # State size at the bucket's first and last batch, so growth over hours and days needs no
    # raw rows (migration 0006; NULL in buckets computed before it and not recomputed since).
    num_rows_total_first: Mapped[int | None]
    num_rows_total_last: Mapped[int | None]
    num_rows_updated: Mapped[int]
    num_rows_removed: Mapped[int]
    num_rows_dropped_by_watermark: Mapped[int]
    memory_used_bytes_max: Mapped[int]
    all_updates_time_ms: Mapped[int]
    all_removals_time_ms: Mapped[int]
    commit_time_ms: Mapped[int]


class QueryStall(Base):
    """A run that stopped reporting (no progress, no idle event) and, once it resumes, when."""

    __tablename__ = "query_stalls"
    # (tenant, detected_at): a tenant's newest marks, GET /api/v1/stalls (migration 0012).
    __table_args__ = (sa.Index(None, "query_id", "detected_at"),
                      sa.Index(None, "tenant", "detected_at"))

    run_id: Mapped[str] = mapped_column(primary_key=True)
    detected_at: Mapped[datetime] = mapped_column(primary_key=True)
    tenant: Mapped[str] = _tenant_column()
    query_id: Mapped[str]
    name: Mapped[str | None]
    app_name: Mapped[str]
    app_id: Mapped[str]
    last_event_at: Mapped[datetime]
    """The run's last event when the stall was detected."""
    threshold_seconds: Mapped[float]
    cleared_at: Mapped[datetime | None]


class JobRun(Base):
    """One claimed run of a scheduled job: the key makes each (job, slot) run once across
    collector replicas sharing the database."""

    __tablename__ = "job_runs"

    job: Mapped[str] = mapped_column(primary_key=True)
    slot: Mapped[datetime] = mapped_column(primary_key=True)
    replica: Mapped[str]
    ran_at: Mapped[datetime]


class ReplicaProgress(Base):
    """How far a collector replica has written what it acknowledged (its history pump's
    ``written_until``, reported every few seconds; migration 0011): the jobs that judge a run's
    silence look no further than the least of the live replicas'."""

    __tablename__ = "replica_progress"

    replica: Mapped[str] = mapped_column(primary_key=True)
    written_until: Mapped[datetime]
    reported_at: Mapped[datetime]


# --- written by the listener's plan reader (migration 0003) -------------------------------------


class OperatorPlan(Base):
    """What state operator ``operator_index`` of a run is in the executed plan (one row per run
    and operator; ``source`` = progress when the plan could not be read, with ``note`` saying
    why). No foreign key: the plan may be written before the run's first batch row."""

    __tablename__ = "operator_plans"
    __table_args__ = (sa.Index(None, "query_id", "read_at"),)

    run_id: Mapped[str] = mapped_column(primary_key=True)
    operator_index: Mapped[int] = mapped_column(sa.Integer, primary_key=True, autoincrement=False)
    query_id: Mapped[str]
    read_at: Mapped[datetime]
    batch_id: Mapped[int | None]
    source: Mapped[str]
    note: Mapped[str | None] = mapped_column(sa.Text)
    operator_name: Mapped[str]
    kind: Mapped[str]
    node: Mapped[str | None]
    operator_id: Mapped[int | None] = mapped_column(sa.Integer)
    keys: Mapped[Any]
    output_mode: Mapped[str | None]
    watermark_column: Mapped[str | None]
    watermark_delay_ms: Mapped[int | None]
    num_state_stores: Mapped[int | None] = mapped_column(sa.Integer)
    state_store_provider: Mapped[str | None]
    checkpoint_location: Mapped[str | None] = mapped_column(sa.Text)
    # The whole identity (event-time keys, watermarks, join cleanup...) and the run's settings.
    details: Mapped[dict[str, Any]]
    settings: Mapped[dict[str, Any]]



class RunTrigger(Base):
    """The trigger of a run (migration 0009): its kind (``processing_time``, ``available_now``,
    ``once``, ``continuous``, ``real_time``) and interval, read by the listener with the plan
    (Spark's events do not carry it). One row per run whose trigger was read, stateless runs
    included; no foreign key, like ``operator_plans``."""

    __tablename__ = "run_triggers"
    __table_args__ = (sa.Index(None, "query_id"),)

    run_id: Mapped[str] = mapped_column(primary_key=True)
    query_id: Mapped[str]
    read_at: Mapped[datetime]
    trigger_kind: Mapped[str]
    trigger_interval_ms: Mapped[int | None]

metadata = Base.metadata
