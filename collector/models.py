"""Request and response shapes of the HTTP API, as Pydantic models (they make the OpenAPI)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

# The history's read views are dataclasses FastAPI serves as they are: one definition for the
# CLI, the doctor and the HTTP API.
from sparkwatch.history.views import QuerySummary as QuerySummary
from sparkwatch.history.views import RunSummary as RunSummary
from sparkwatch.history.views import StatePoint as StatePoint
from sparkwatch.model.contract import envelope_schema
from sparkwatch.plan.wire import plan_schema


class Error(BaseModel):
    detail: str = Field(description="What was wrong, in one line.")
    request_id: str | None = Field(
        None, description="The request's id (X-Request-Id), as in the collector's log lines.")


class Rejected(BaseModel):
    index: int = Field(description="Position of the event in the request's events array.")
    reason: Literal["invalid", "forbidden_app", "limit"]
    error: str = Field(description="Why, naming the offending field or limit.")


class IngestResult(BaseModel):
    accepted: int = Field(description="Events accepted: durable in the spool and in /metrics.")
    duplicates: int = Field(
        description="Accepted progress events already seen (same run id and batch id): not "
        "counted again.")
    rejected: list[Rejected] = Field(description="Events refused, with the reason for each.")


class RunException(BaseModel):
    query_id: str
    run_id: str
    exception: str = Field(description="The run's whole exception, as Spark reported it (runs "
                           "answers carry its first 1,000 characters).")


class Health(BaseModel):
    status: Literal["ok"]


class HistoryHealth(BaseModel):
    enabled: bool
    ok: bool = Field(description="False while history writes fail (events stay spooled).")
    error: str | None = None


class SpoolHealth(BaseModel):
    pending_bytes: int
    max_bytes: int
    writable: bool = Field(True, description="false while the last append failed (the disk is "
                           "full or failing): ingest answers 503 whatever pending_bytes says.")
    error: str | None = Field(None, description="why the last append failed, while it did")


class WorkerHealth(BaseModel):
    name: str = Field(description="The worker, e.g. history (the pump that feeds the history).")
    state: Literal["ok", "hung", "dead", "stopped"] = Field(
        description="hung: no progress for longer than deadline_seconds (blocked in a call); "
        "dead: its thread ended on an error.")
    seconds_since_progress: float
    deadline_seconds: float


class Ready(BaseModel):
    status: Literal["ready", "degraded", "full", "spool_unwritable"] = Field(
        description="ready; degraded: the history store is failing or a worker is hung or dead, "
        "ingest continues into the spool; full: the spool is (nearly) full, ingest answers 503; "
        "spool_unwritable: the last append to the spool failed (its disk is full or failing), "
        "ingest answers 503 until one succeeds.")
    history: HistoryHealth
    spool: SpoolHealth | None = None
    workers: list[WorkerHealth] = Field(default_factory=list)


class ProgressPoint(BaseModel):
    timestamp: datetime
    run_id: str
    batch_id: int
    batch_duration_ms: int
    num_input_rows: int
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    duration_ms: dict[str, Any]
    event_time_min: datetime | None
    event_time_max: datetime | None
    event_time_avg: datetime | None
    watermark: datetime | None


class Rollup(BaseModel):
    """A query rollup; operator rollups carry the operator fields too."""

    query_id: str
    resolution: Literal["minute", "hour", "day"]
    bucket_start: datetime
    batches: int
    num_input_rows: int | None = None
    batch_duration_ms_sum: int | None = None
    batch_duration_ms_max: int | None = None
    batch_duration_ms_p95: float | None = None
    operator_index: int | None = None
    operator_name: str | None = None
    num_rows_total_max: int | None = None
    num_rows_total_avg: float | None = None
    num_rows_total_first: int | None = None
    num_rows_total_last: int | None = None
    num_rows_updated: int | None = None
    num_rows_removed: int | None = None
    num_rows_dropped_by_watermark: int | None = None
    memory_used_bytes_max: int | None = None
    all_updates_time_ms: int | None = None
    all_removals_time_ms: int | None = None
    commit_time_ms: int | None = None


class PlanOperator(BaseModel):
    """What state operator ``index`` of a run is in the executed plan."""

    index: int
    operator: str
    kind: str
    node: str | None = None
    operator_id: int | None = None
    keys: list[str] = Field(default_factory=list)
    event_time_keys: list[str] = Field(default_factory=list)
    output_mode: str | None = None
    watermark_column: str | None = None
    watermark_delay_ms: int | None = None
    watermarks: list[dict[str, Any]] = Field(default_factory=list)
    num_state_stores: int | None = None
    state_store_provider: str | None = None
    checkpoint_location: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class QueryPlan(BaseModel):
    """Operator identity of one run, as the listener read it (source plan) or as only the
    progress said (source progress, ``note`` saying why)."""

    query_id: str
    run_id: str
    source: Literal["plan", "progress"]
    batch_id: int | None = None
    read_at: float
    note: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    operators: list[PlanOperator]


class Stall(BaseModel):
    run_id: str
    query_id: str
    name: str | None
    app_name: str
    app_id: str
    detected_at: datetime
    last_event_at: datetime
    threshold_seconds: float
    cleared_at: datetime | None


INGEST_BODY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["events"],
    "properties": {
        "events": {
            "type": "array",
            "description": (
                "Listener events, each the wire envelope {kind, app: {name, id, spark_version}, "
                "received_at, payload} where payload is Spark's own event JSON. Items are "
                "validated one by one against the contract (docs/reliability.md), so one bad "
                "event does not refuse the others: it is listed in `rejected` with the field "
                "path. At most max_events_per_request items (default 5000)."
            ),
            # The contract's schema documents a valid event; anything else is still a valid
            # request, answered 200 with the event listed in `rejected`.
            "items": {"anyOf": [envelope_schema(), plan_schema(), {
                "description": "Any other JSON value: refused on its own (see rejected)."}]},
        }
    },
    "example": {
        "events": [{
            "kind": "idle",
            "app": {"name": "orders-etl", "id": "app-20261121093000-0001",
                    "spark_version": "4.3.0"},
            "received_at": 1795252542.5,
            "payload": {"id": "1891866a-6a90-4757-ae6c-d02aafae929f",
                        "runId": "2e963325-7856-4a04-95cf-ac7ac40941b8",
                        "timestamp": "2026-11-21T10:15:42.500Z"},
        }]
    },
}
