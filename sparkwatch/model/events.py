"""Typed records for Spark streaming query events.

These are the one event model of sparkwatch: the listener, the exporter, the history writer and the
collector all consume them. They are built only by :mod:`sparkwatch.model.parse` from Spark's own
JSON, which stays the wire format (see :class:`Envelope`), so fields Spark adds later are never lost
on the way to the collector.

Times are UTC epoch seconds (float); durations keep Spark's milliseconds, named ``*_ms``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, make_dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sparkwatch.model.fields import OPERATOR_FIELDS

JsonValue = Any


class EventKind(StrEnum):
    STARTED = "started"
    PROGRESS = "progress"
    IDLE = "idle"
    TERMINATED = "terminated"


@dataclass(frozen=True, slots=True)
class AppInfo:
    """The Spark application a query runs in."""

    name: str
    id: str
    spark_version: str = ""


@dataclass(frozen=True, slots=True)
class EventTime:
    """``eventTime`` of a progress: min/max/avg only when the batch had data."""

    min: float | None = None
    max: float | None = None
    avg: float | None = None
    watermark: float | None = None


if TYPE_CHECKING:
    # What mypy sees of the class built below from the field table; tests/test_fields.py
    # proves the two have the same fields in the same order.
    @dataclass(frozen=True, slots=True)
    class StateOperator:
        """One ``StateOperatorProgress``; ``index`` is its position in the plan."""

        index: int
        name: str
        num_rows_total: int
        num_rows_updated: int
        all_updates_time_ms: int
        num_rows_removed: int
        all_removals_time_ms: int
        commit_time_ms: int
        memory_used_bytes: int
        num_rows_dropped_by_watermark: int
        num_shuffle_partitions: int
        num_state_store_instances: int
        custom_metrics: Mapping[str, int | float] = field(default_factory=dict)
else:
    StateOperator = make_dataclass(
        "StateOperator",
        [("index", int), ("name", str), *((f.attr, f.type) for f in OPERATOR_FIELDS),
         ("custom_metrics", Mapping[str, int | float], field(default_factory=dict))],
        frozen=True, slots=True,
    )
    StateOperator.__module__ = __name__  # pickles as sparkwatch.model.events.StateOperator
    StateOperator.__doc__ = ("One ``StateOperatorProgress``; ``index`` is its position in the "
                             "plan (stable identity). Its fields after index and name are "
                             ":data:`~sparkwatch.model.fields.OPERATOR_FIELDS`.")


@dataclass(frozen=True, slots=True)
class SourceProgress:
    index: int
    description: str
    start_offset: JsonValue
    end_offset: JsonValue
    latest_offset: JsonValue
    num_input_rows: int
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    metrics: Mapping[str, str] = field(default_factory=dict)

    def numeric_metric(self, key: str) -> float | None:
        """A source metric as a number (Spark sends them as strings), or None."""
        raw = self.metrics.get(key)
        if raw is None:
            return None
        try:
            return float(raw)
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class SinkProgress:
    description: str
    num_output_rows: int
    """-1 for V1 sinks, which do not report it."""
    metrics: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueryStarted:
    query_id: str
    run_id: str
    name: str | None
    timestamp: float
    job_tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QueryProgress:
    query_id: str
    run_id: str
    name: str | None
    timestamp: float
    batch_id: int
    batch_duration_ms: int
    num_input_rows: int
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    duration_ms: Mapping[str, int]
    event_time: EventTime
    state_operators: tuple[StateOperator, ...]
    sources: tuple[SourceProgress, ...]
    sink: SinkProgress | None
    observed_metrics: Mapping[str, Mapping[str, JsonValue]]


@dataclass(frozen=True, slots=True)
class QueryIdle:
    query_id: str
    run_id: str
    timestamp: float


@dataclass(frozen=True, slots=True)
class QueryTerminated:
    query_id: str
    run_id: str
    exception: str | None
    error_class: str | None


QueryEvent = QueryStarted | QueryProgress | QueryIdle | QueryTerminated


@dataclass(frozen=True, slots=True)
class Envelope:
    """One event as it travels: which app, when the listener got it, and Spark's JSON untouched.

    ``payload`` is the JSON object Spark produced for the event (for progress, the progress object
    itself, not Spark's ``{"progress": ...}`` wrapper).
    """

    kind: EventKind
    app: AppInfo
    received_at: float
    payload: Mapping[str, JsonValue]


@dataclass(frozen=True, slots=True)
class ParsedEvent:
    """An envelope with its typed event."""

    envelope: Envelope
    event: QueryEvent

    @property
    def app(self) -> AppInfo:
        return self.envelope.app

    @property
    def kind(self) -> EventKind:
        return self.envelope.kind

    @property
    def happened_at(self) -> float:
        """When the event happened (epoch seconds): Spark's timestamp; a QueryTerminated has
        none, so when the listener got it."""
        event = self.event
        if isinstance(event, QueryTerminated):
            return self.envelope.received_at
        return event.timestamp
