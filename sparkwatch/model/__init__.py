"""The event model shared by the listener and the collector."""

from sparkwatch.model.events import (
    AppInfo,
    Envelope,
    EventKind,
    EventTime,
    ParsedEvent,
    QueryEvent,
    QueryIdle,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
    SinkProgress,
    SourceProgress,
    StateOperator,
)
from sparkwatch.model.parse import (
    EventParseError,
    envelope_from_dict,
    envelope_from_json,
    envelope_to_dict,
    parse_envelope,
    parse_payload,
    parse_progress,
)

__all__ = [
    "AppInfo",
    "Envelope",
    "EventKind",
    "EventParseError",
    "EventTime",
    "ParsedEvent",
    "QueryEvent",
    "QueryIdle",
    "QueryProgress",
    "QueryStarted",
    "QueryTerminated",
    "SinkProgress",
    "SourceProgress",
    "StateOperator",
    "envelope_from_dict",
    "envelope_from_json",
    "envelope_to_dict",
    "parse_envelope",
    "parse_payload",
    "parse_progress",
]
