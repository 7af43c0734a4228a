"""Events to table rows: pure functions, no database.

Rows are plain dicts keyed by column name, ready for one executemany per table. Every row of a
table has the same keys (executemany needs it).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from sparkwatch.history.columns import from_epoch
from sparkwatch.history.schema import FAILED, RUNNING, TERMINATED
from sparkwatch.model.events import (
    ParsedEvent,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
    StateOperator,
)
from sparkwatch.model.fields import OPERATOR_FIELDS
from sparkwatch.plan.codec import identity_to_dict
from sparkwatch.plan.model import QueryPlan

Row = dict[str, Any]

# durationMs keys Spark reports today -> their batches column; the whole map is kept as JSON too.
DURATION_COLUMNS = {
    "addBatch": "add_batch_ms",
    "getBatch": "get_batch_ms",
    "latestOffset": "latest_offset_ms",
    "getOffset": "get_offset_ms",
    "queryPlanning": "query_planning_ms",
    "walCommit": "wal_commit_ms",
    "commitOffsets": "commit_offsets_ms",
    "triggerExecution": "trigger_execution_ms",
}


@dataclass
class Rows:
    runs: list[Row] = field(default_factory=list)
    batches: list[Row] = field(default_factory=list)
    operators: list[Row] = field(default_factory=list)
    sources: list[Row] = field(default_factory=list)
    sinks: list[Row] = field(default_factory=list)


def unique_batches(events: Sequence[ParsedEvent]) -> Iterator[QueryProgress]:
    """The progress events, the first of each (run, batch): the same batch twice in one write
    makes one row, as it does across writes."""
    seen: set[tuple[str, int]] = set()
    for parsed in events:
        progress = parsed.event
        if isinstance(progress, QueryProgress) and (key := (progress.run_id,
                                                            progress.batch_id)) not in seen:
            seen.add(key)
            yield progress


def rows_for(events: Sequence[ParsedEvent]) -> Rows:
    rows = Rows(runs=run_rows(events))
    for progress in unique_batches(events):
        rows.batches.append(batch_row(progress))
        child = _child_key(progress)  # once per batch: its children share it
        rows.operators.extend(operator_row(progress, op, child)
                              for op in progress.state_operators)
        rows.sources.extend(source_rows(progress, child))
        if progress.sink is not None:
            rows.sinks.append(sink_row(progress, child))
    return rows


NO_BOUNDS: Row = {"first_batch_id": None, "last_batch_id": None, "last_progress_at": None}
"""The batch bounds of a run no event of a write is a batch of (the upsert keeps what is stored)."""


def run_rows(events: Iterable[ParsedEvent]) -> list[Row]:
    """One row per run, folding all of the run's events in order (see ``writer`` for the merge
    with what the database already holds)."""
    runs: dict[str, Row] = {}
    for parsed in events:
        patch = run_patch(parsed)
        previous = runs.get(patch["run_id"])
        runs[patch["run_id"]] = patch if previous is None else merge_run(previous, patch)
    return list(runs.values())


def run_patch(parsed: ParsedEvent) -> Row:
    """What one event says about its run; None means "this event does not know"."""
    event = parsed.event
    app = parsed.envelope.app
    row: Row = {
        "run_id": event.run_id,
        "query_id": event.query_id,
        "name": clean_text(getattr(event, "name", None)),
        "app_name": app.name,
        "app_id": app.id,
        "spark_version": app.spark_version,
        "job_tags": None,
        "started_at": None,
        "ended_at": None,
        "exception": None,
        "error_class": None,
        "status": RUNNING,
        "last_event_at": from_epoch(parsed.happened_at),
        **NO_BOUNDS,
    }
    if isinstance(event, QueryProgress):
        # The run's batch bounds (query_runs.first_batch_id, last_batch_id, last_progress_at).
        row["first_batch_id"] = row["last_batch_id"] = event.batch_id
        row["last_progress_at"] = from_epoch(event.timestamp)
    elif isinstance(event, QueryStarted):
        row["started_at"] = row["last_event_at"]
        row["job_tags"] = list(event.job_tags)
    elif isinstance(event, QueryTerminated):
        row["ended_at"] = row["last_event_at"]
        row["exception"] = clean_text(event.exception)
        row["error_class"] = event.error_class
        row["status"] = FAILED if event.exception else TERMINATED
    return row


_BOUNDS = (("first_batch_id", min), ("last_batch_id", max), ("last_progress_at", max))


def merge_run(old: Row, new: Row) -> Row:
    """``new`` fills what it knows; the end of a run and the latest event time are sticky."""
    merged = {k: new[k] if new[k] is not None else old[k] for k in old}
    if new["ended_at"] is None:
        for key in ("ended_at", "exception", "error_class", "status"):
            merged[key] = old[key]
    merged["last_event_at"] = max(old["last_event_at"], new["last_event_at"])
    # The batch bounds only widen: the least first batch, the greatest last batch and time,
    # whatever order the batches came in (the writer's upsert does the same with what is stored).
    for key, pick in _BOUNDS:
        if old[key] is not None and new[key] is not None:
            merged[key] = pick(old[key], new[key])
    # A run ends no earlier than its latest event: a driver's clock stepping back between a
    # progress and the end (its time is the listener's) or a made-up end would make a negative
    # run. The writer's upsert does the same against what is stored.
    if merged["ended_at"] is not None:
        merged["ended_at"] = max(merged["ended_at"], merged["last_event_at"])
    return merged


def batch_row(p: QueryProgress) -> Row:
    row: Row = {
        "run_id": p.run_id,
        "batch_id": p.batch_id,
        "query_id": p.query_id,
        "timestamp": from_epoch(p.timestamp),
        "batch_duration_ms": p.batch_duration_ms,
        "num_input_rows": p.num_input_rows,
        "input_rows_per_second": p.input_rows_per_second,
        "processed_rows_per_second": p.processed_rows_per_second,
        "duration_ms": dict(p.duration_ms),
        "event_time_min": from_epoch(p.event_time.min),
        "event_time_max": from_epoch(p.event_time.max),
        "event_time_avg": from_epoch(p.event_time.avg),
        "watermark": from_epoch(p.event_time.watermark),
        "observed_metrics": json_safe(p.observed_metrics),
    }
    for key, column in DURATION_COLUMNS.items():
        row[column] = p.duration_ms.get(key)
    return row


def _child_key(p: QueryProgress) -> Row:
    return {
        "run_id": p.run_id,
        "batch_id": p.batch_id,
        "query_id": p.query_id,
        "timestamp": from_epoch(p.timestamp),
    }


OPERATOR_ATTRS = tuple(f.attr for f in OPERATOR_FIELDS)
operator_values = attrgetter(*OPERATOR_ATTRS)


def operator_row(p: QueryProgress, op: StateOperator, child: Row | None = None) -> Row:
    return {
        **(child or _child_key(p)),
        "operator_index": op.index,
        "operator_name": nul_free(op.name),
        **dict(zip(OPERATOR_ATTRS, operator_values(op), strict=True)),
        "custom_metrics": json_safe(op.custom_metrics),
    }


def source_rows(p: QueryProgress, child: Row | None = None) -> list[Row]:
    child = child or _child_key(p)
    return [
        {
            **child,
            "source_index": s.index,
            "description": nul_free(s.description),
            "start_offset": json_safe(s.start_offset),
            "end_offset": json_safe(s.end_offset),
            "latest_offset": json_safe(s.latest_offset),
            "num_input_rows": s.num_input_rows,
            "input_rows_per_second": s.input_rows_per_second,
            "processed_rows_per_second": s.processed_rows_per_second,
            "metrics": json_safe(s.metrics),
        }
        for s in p.sources
    ]


def sink_row(p: QueryProgress, child: Row | None = None) -> Row:
    assert p.sink is not None
    return {
        **(child or _child_key(p)),
        "description": nul_free(p.sink.description),
        "num_output_rows": p.sink.num_output_rows,
        "metrics": json_safe(p.sink.metrics),
    }


def json_safe(value: Any) -> Any:
    """``value`` as JSON PostgreSQL accepts: JSONB rejects NaN/Infinity and NUL characters.

    A value the database refuses would fail the write on every retry, so it is rewritten instead:
    non-finite numbers become the strings Spark itself uses ("NaN", "Infinity").
    """
    if type(value) is dict and _flat_and_safe(value):
        return value  # the common case (custom metrics, source metrics), checked at C speed
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, str):
        return nul_free(value)
    if isinstance(value, Mapping):
        return {nul_free(str(k)): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


_SCALARS = frozenset((int, float, str))
_NUMBERS = frozenset((int, float))


def _flat_and_safe(value: dict[Any, Any]) -> bool:
    """True for a map of str keys to finite numbers or strings, none holding a NUL character."""
    values = value.values()
    kinds = set(map(type, values))
    if not kinds <= _SCALARS:
        return False
    try:
        if kinds <= _NUMBERS:  # custom metrics: every value checked in C
            return ((float not in kinds or all(map(math.isfinite, values)))
                    and "\x00" not in "".join(value))
        if float in kinds and not all(map(math.isfinite, (v for v in values if type(v) is float))):
            return False
        text = "".join(value)
        if str in kinds:
            text += "".join(v for v in values if type(v) is str)
    except (TypeError, OverflowError):  # a key that is not a string; an int past any float
        return False
    return "\x00" not in text


def clean_text(value: str | None) -> str | None:
    return None if value is None else nul_free(value)


def nul_free(value: str) -> str:
    # PostgreSQL text cannot hold NUL; keep the rest of the string.
    return value.replace("\x00", "\ufffd")


# --- operator plans (migration 0003) --------------------------------------------------------


def trigger_rows(plan: QueryPlan) -> list[Row]:
    """The ``run_triggers`` row of the plan's run (none when its trigger is unknown)."""
    if plan.trigger is None:
        return []
    return [{"run_id": plan.run_id, "query_id": plan.query_id,
             "read_at": from_epoch(plan.read_at), "trigger_kind": plan.trigger,
             "trigger_interval_ms": plan.trigger_interval_ms}]


def plan_rows(plan: QueryPlan) -> list[Row]:
    """One ``operator_plans`` row per operator of the plan's run."""
    return [
        {
            "run_id": plan.run_id,
            "operator_index": op.index,
            "query_id": plan.query_id,
            "read_at": from_epoch(plan.read_at),
            "batch_id": plan.batch_id,
            "source": plan.source.value,
            "note": clean_text(plan.note),
            "operator_name": nul_free(op.operator),
            "kind": op.kind,
            "node": op.node,
            "operator_id": op.operator_id,
            "keys": json_safe(list(op.keys)),
            "output_mode": op.output_mode,
            "watermark_column": clean_text(op.watermark_column),
            "watermark_delay_ms": op.watermark_delay_ms,
            "num_state_stores": op.num_state_stores,
            "state_store_provider": op.state_store_provider,
            "checkpoint_location": clean_text(op.checkpoint_location),
            "details": json_safe(identity_to_dict(op)),
            "settings": json_safe(dict(plan.settings)),
        }
        for op in plan.operators
    ]
