"""Spooled progress events read back in one typed pass (msgspec), for the history writer.

The writer used to decode each spooled record to Python objects (orjson) and then parse every
event again, field by field, with :func:`~sparkwatch.model.parse.parse_envelope`: about half of
its CPU per event (docs/benchmarks.md, "A write path near the floor"). Here msgspec decodes a
record straight into typed structs, checking types and ranges in C, and the event model is built
from them with no check left to make.

The result must be exactly what ``parse_envelope(envelope_from_dict(item))`` makes of the same
item, or nothing: whatever the structs do not vouch for (another kind than progress, a plan, a
float where Spark writes an integer, a NUL, a value out of range, a record of an older collector)
makes :func:`read_record` answer None for that event, which then takes the exact parser, with
its messages and the quarantine. Spooled events passed the contract at ingest, so that is rare.

The payload is not decoded into a dict: nothing the writer does reads it, except the quarantine,
which gets it from :class:`RawPayload` on demand.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import msgspec
import orjson

from sparkwatch.jsoncodec import loads
from sparkwatch.model.contract import INT64_MAX, INT64_MIN, LIMITS
from sparkwatch.model.events import (
    AppInfo,
    Envelope,
    EventKind,
    JsonValue,
    ParsedEvent,
    QueryProgress,
    SinkProgress,
    SourceProgress,
    StateOperator,
)
from sparkwatch.model.fields import OPERATOR_FIELDS
from sparkwatch.model.parse import EventParseError, parse_event_time, parse_timestamp

Count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Key = Annotated[str, msgspec.Meta(max_length=LIMITS.key_chars)]
Number = int | float
_LATEST_EPOCH = 253402300799  # as sparkwatch.model.parse: 9999-12-31T23:59:59Z


class _Source(msgspec.Struct, rename="camel"):
    description: str | None = None
    start_offset: Any = None
    end_offset: Any = None
    latest_offset: Any = None
    num_input_rows: Count | None = None
    input_rows_per_second: Number | None = None
    processed_rows_per_second: Number | None = None
    metrics: Annotated[dict[str, str], msgspec.Meta(max_length=LIMITS.map_entries)] = {}


class _Sink(msgspec.Struct, rename="camel"):
    description: str | None = None
    num_output_rows: Annotated[int, msgspec.Meta(ge=-1, le=INT64_MAX)] | None = None
    metrics: Annotated[dict[str, str], msgspec.Meta(max_length=LIMITS.map_entries)] = {}


# StateOperatorProgress from the field table: its counters in the table's order, then the rest.
_Operator = msgspec.defstruct(
    "_Operator",
    [("operator_name", str | None, None),
     *((f.json, Count | None, None) for f in OPERATOR_FIELDS),
     ("custom_metrics",
      Annotated[dict[Key, Number], msgspec.Meta(max_length=LIMITS.map_entries)], {})],
    rename={"operator_name": "operatorName", "custom_metrics": "customMetrics"},
)
_COUNTERS = tuple(f.json for f in OPERATOR_FIELDS)


class _Progress(msgspec.Struct, rename="camel"):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=LIMITS.id_chars)]
    run_id: Annotated[str, msgspec.Meta(min_length=1, max_length=LIMITS.id_chars)]
    timestamp: str
    batch_id: Count
    name: Annotated[str, msgspec.Meta(max_length=LIMITS.name_chars)] | None = None
    batch_duration: Count | None = None
    num_input_rows: Count | None = None
    input_rows_per_second: Number | None = None
    processed_rows_per_second: Number | None = None
    duration_ms: Annotated[dict[Key, Count], msgspec.Meta(max_length=LIMITS.map_entries)] = {}
    event_time: dict[str, Any] | None = None
    state_operators: Annotated[list[_Operator],  # type: ignore[valid-type]
                               msgspec.Meta(max_length=LIMITS.operators)] = []
    sources: Annotated[list[_Source], msgspec.Meta(max_length=LIMITS.sources)] = []
    sink: _Sink | None = None
    observed_metrics: Annotated[dict[str, dict[str, Any]],
                                msgspec.Meta(max_length=LIMITS.map_entries)] = {}


class _App(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=LIMITS.name_chars)]
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=LIMITS.id_chars)]
    spark_version: Annotated[str, msgspec.Meta(max_length=LIMITS.name_chars)] | None = None


class _Envelope(msgspec.Struct):
    kind: str
    app: _App
    received_at: Annotated[float, msgspec.Meta(ge=0, le=_LATEST_EPOCH)]
    payload: msgspec.Raw


class _TenantRecord(msgspec.Struct):
    events: list[msgspec.Raw]
    tenant: str | None = None


_RECORD = msgspec.json.Decoder(list[msgspec.Raw] | _TenantRecord)
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_PROGRESS = msgspec.json.Decoder(_Progress)


class Unsure(Exception):
    """The structs do not vouch for this event: the exact parser reads it."""


class RawPayload(Mapping[str, JsonValue]):
    """An event's payload kept as its JSON text, decoded on first use (the quarantine's)."""

    __slots__ = ("_raw", "_value")

    def __init__(self, raw: msgspec.Raw) -> None:
        self._raw = raw
        self._value: dict[str, JsonValue] | None = None

    def value(self) -> dict[str, JsonValue]:
        if self._value is None:
            self._value = orjson.loads(bytes(self._raw))
        return self._value

    def __getitem__(self, key: str) -> JsonValue:
        return self.value()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.value())

    def __len__(self) -> int:
        return len(self.value())


def split_record(data: bytes) -> tuple[str | None, list[msgspec.Raw]] | None:
    """A spool record's tenant (None: the default, a bare list) and its events as JSON texts;
    None when it is not a record msgspec reads (the exact path decodes it)."""
    try:
        record = _RECORD.decode(data)
    except msgspec.MsgspecError:
        return None
    if isinstance(record, _TenantRecord):
        return record.tenant, record.events
    return None, record


def read_event(raw: msgspec.Raw) -> ParsedEvent:
    """One spooled event as the event model. Raises :class:`Unsure` for what the exact parser
    must read (anything but a progress event these structs and checks vouch for)."""
    try:
        envelope = _ENVELOPE.decode(raw)
        if envelope.kind != "progress":
            raise Unsure
        progress = _PROGRESS.decode(envelope.payload)
        return ParsedEvent(Envelope(EventKind.PROGRESS, _app(envelope.app),
                                    envelope.received_at, RawPayload(envelope.payload)),
                           _progress(progress))
    except (msgspec.MsgspecError, EventParseError):
        raise Unsure from None


def _app(app: _App) -> AppInfo:
    version = app.spark_version or ""
    _plain(app.name, app.id, version)
    return AppInfo(app.name, app.id, version)


def _progress(p: _Progress) -> QueryProgress:
    _plain(p.id, p.run_id, p.name or "")
    durations = p.duration_ms
    return QueryProgress(
        query_id=p.id, run_id=p.run_id, name=p.name,
        timestamp=parse_timestamp(p.timestamp, "progress.timestamp"),
        batch_id=p.batch_id,
        batch_duration_ms=(p.batch_duration if p.batch_duration is not None
                           else durations.get("triggerExecution", 0)),
        num_input_rows=p.num_input_rows or 0,
        input_rows_per_second=_rate(p.input_rows_per_second),
        processed_rows_per_second=_rate(p.processed_rows_per_second),
        duration_ms=durations,
        event_time=parse_event_time(p.event_time),
        state_operators=tuple(_operator(op, i) for i, op in enumerate(p.state_operators)),
        sources=tuple(_source(s, i) for i, s in enumerate(p.sources)),
        sink=None if p.sink is None else _sink(p.sink),
        observed_metrics=_observed(p.observed_metrics),
    )


def _operator(op: Any, index: int) -> StateOperator:
    name = op.operator_name or "unknown"
    if len(name) > LIMITS.name_chars:
        raise Unsure
    counters = [getattr(op, key) for key in _COUNTERS]
    if None in counters:  # the exact parser then checks the name's text too
        _plain(name)
        counters = [value or 0 for value in counters]
    return StateOperator(index, name, *counters,  # type: ignore[arg-type, call-arg]
                         op.custom_metrics)


def _source(s: _Source, index: int) -> SourceProgress:
    return SourceProgress(
        index=index, description=_text(s.description),
        start_offset=s.start_offset, end_offset=s.end_offset, latest_offset=s.latest_offset,
        num_input_rows=s.num_input_rows or 0,
        input_rows_per_second=_rate(s.input_rows_per_second),
        processed_rows_per_second=_rate(s.processed_rows_per_second),
        metrics=_metrics(s.metrics),
    )


def _sink(s: _Sink) -> SinkProgress:
    return SinkProgress(
        description=_text(s.description),
        num_output_rows=-1 if s.num_output_rows is None else s.num_output_rows,
        metrics=_metrics(s.metrics),
    )


def _rate(value: Number | None) -> float | None:
    if value is None:
        return None
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        raise Unsure
    number = float(value)
    return number if math.isfinite(number) else None


def _text(value: str | None) -> str:
    if not value:
        return ""
    if len(value) > LIMITS.text_chars:
        raise Unsure
    _plain(value)
    return value


def _metrics(metrics: dict[str, str]) -> dict[str, str]:
    if metrics and (max(map(len, metrics)) > LIMITS.key_chars
                    or max(map(len, metrics.values())) > LIMITS.text_chars):
        raise Unsure
    _plain(*metrics, *metrics.values())
    return metrics


def _observed(observed: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    if observed and max(map(len, observed)) > LIMITS.key_chars:
        raise Unsure
    _plain(*observed)
    return observed


def _plain(*texts: str) -> None:
    """No NUL (lone surrogates never get past msgspec's decoder)."""
    if "\x00" in "".join(texts):
        raise Unsure


class TypedRecord(list[Any]):
    """A spool record read by :func:`typed_record`: its events, each a :class:`ParsedEvent` or,
    where the structs were unsure, the item's JSON for the exact parser."""

    tenant: str | None = None


def typed_record(data: bytes) -> Any:
    """A spool record's bytes (``read_span``'s ``decode``): a :class:`TypedRecord`, or the plain
    JSON when msgspec does not read the record at all (the exact path then does)."""
    split = split_record(data)
    if split is None:
        return loads(data)
    record = TypedRecord()
    record.tenant = split[0]
    for raw in split[1]:
        try:
            record.append(read_event(raw))
        except Unsure:
            record.append(loads(bytes(raw)))
    return record
