"""Wire events read typed in one pass (msgspec): the collector's fast way in at ingest, and the
history writer's way back from the spool.

Ingest used to decode each request with orjson and parse every event, field by field, into the
event model (:func:`~sparkwatch.model.parse.parse_envelope`), and the history writer decoded
and parsed it all again from the spool: most of the collector's CPU per event
(docs/benchmarks.md, "A write path near the floor"). Here msgspec decodes JSON straight into
typed structs, checking types and ranges in C, and the event model is built from them with no
check left to make.

The result must be exactly what the exact parser makes of the same JSON, or nothing: whatever
the structs do not vouch for (another kind than progress, a plan, a float where Spark writes an
integer, a NUL, a value out of range, a record of an older collector) raises :class:`Unsure`,
and the exact parser reads it, with its messages and the quarantine.

The structs hold Spark's keys in Spark's order, absent keys stay absent (``UNSET``): encoding a
struct again gives back the bytes it was read from exactly when the JSON named each key once
and spelled every value as the encoder does. That is the canonical check of
:func:`~sparkwatch.model.contract.canonical_is_clean`, without building a dict of the payload.

The payload is not decoded into a dict: nothing downstream reads it, except the quarantine,
which gets it from :class:`RawPayload` on demand.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType
from msgspec.structs import astuple

from sparkwatch.jsoncodec import LEAN_DECODE_BYTES, loads
from sparkwatch.model.contract import (
    BATCH_TIME_END,
    INT64_MAX,
    INT64_MIN,
    LATEST_EPOCH,
    LIMITS,
    ContractViolation,
    has_long_integer,
    is_id,
)
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
from sparkwatch.model.parse import (
    EventParseError,
    check_kept,
    parse_event_time,
    parse_timestamp,
)

Count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
Key = Annotated[str, msgspec.Meta(max_length=LIMITS.key_chars)]
Number = int | float
Texts = Annotated[dict[str, str], msgspec.Meta(max_length=LIMITS.map_entries)]
T = TypeVar("T")


class _Source(msgspec.Struct, rename="camel", kw_only=True):
    description: str | None | UnsetType = UNSET
    start_offset: Any = UNSET
    end_offset: Any = UNSET
    latest_offset: Any = UNSET
    num_input_rows: Count | None | UnsetType = UNSET
    input_rows_per_second: Number | None | UnsetType = UNSET
    processed_rows_per_second: Number | None | UnsetType = UNSET
    metrics: Texts | UnsetType = UNSET


class _Sink(msgspec.Struct, rename="camel", kw_only=True):
    description: str | None | UnsetType = UNSET
    num_output_rows: Annotated[int, msgspec.Meta(ge=-1, le=INT64_MAX)] | None | UnsetType = UNSET
    metrics: Texts | UnsetType = UNSET


# StateOperatorProgress from the field table: its counters in the table's (Spark's) order.
_Operator = msgspec.defstruct(
    "_Operator",
    [("operator_name", str | None | UnsetType, UNSET),
     *((f.json, Count | None | UnsetType, UNSET) for f in OPERATOR_FIELDS),
     ("custom_metrics", Annotated[dict[Key, Number], msgspec.Meta(
         max_length=LIMITS.map_entries)] | UnsetType, UNSET)],
    rename={"operator_name": "operatorName", "custom_metrics": "customMetrics"},
    kw_only=True,
)
_INT = frozenset((int,))
Id = Annotated[str, msgspec.Meta(min_length=1, max_length=LIMITS.id_chars)]


class _Progress(msgspec.Struct, rename="camel", kw_only=True):
    id: Id
    run_id: Id
    name: Annotated[str, msgspec.Meta(max_length=LIMITS.name_chars)] | None | UnsetType = UNSET
    timestamp: str
    batch_id: Count
    batch_duration: Count | None | UnsetType = UNSET
    num_input_rows: Count | None | UnsetType = UNSET
    input_rows_per_second: Number | None | UnsetType = UNSET
    processed_rows_per_second: Number | None | UnsetType = UNSET
    duration_ms: Annotated[dict[Key, Count],
                           msgspec.Meta(max_length=LIMITS.map_entries)] | UnsetType = UNSET
    event_time: dict[str, Any] | None | UnsetType = UNSET
    state_operators: Annotated[list[_Operator],  # type: ignore[valid-type]
                               msgspec.Meta(max_length=LIMITS.operators)] | UnsetType = UNSET
    sources: Annotated[list[_Source],
                       msgspec.Meta(max_length=LIMITS.sources)] | UnsetType = UNSET
    sink: _Sink | None | UnsetType = UNSET
    observed_metrics: Annotated[dict[str, dict[str, Any]],
                                msgspec.Meta(max_length=LIMITS.map_entries)] | UnsetType = UNSET


class _App(msgspec.Struct, kw_only=True):
    name: Annotated[str, msgspec.Meta(min_length=1, max_length=LIMITS.name_chars)]
    id: Id
    spark_version: Annotated[str, msgspec.Meta(max_length=LIMITS.name_chars)] | None | \
        UnsetType = UNSET


class _Envelope(msgspec.Struct):
    kind: str
    app: _App
    received_at: Annotated[float, msgspec.Meta(ge=0, le=LATEST_EPOCH)]
    payload: msgspec.Raw


class _TenantRecord(msgspec.Struct):
    events: list[msgspec.Raw]
    tenant: str | None = None


class _Body(msgspec.Struct):
    events: list[msgspec.Raw]


_RECORD = msgspec.json.Decoder(list[msgspec.Raw] | _TenantRecord)
_BODY = msgspec.json.Decoder(_Body)
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_PROGRESS = msgspec.json.Decoder(_Progress)
_ENCODER = msgspec.json.Encoder()
_REFUSED = (msgspec.MsgspecError, ValueError, RecursionError)
"""What msgspec raises on JSON it does not read (invalid UTF-8 is a ``UnicodeDecodeError``,
deep nesting a ``RecursionError``), and the parser's own errors (``EventParseError``)."""


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
            self._value = loads(bytes(self._raw))
        return self._value

    def __getitem__(self, key: str) -> JsonValue:
        return self.value()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.value())

    def __len__(self) -> int:
        return len(self.value())


def typed_body(raw: bytes | bytearray, max_events: int, other: Callable[[bytes], tuple[T, bytes]]
               ) -> list[tuple[ParsedEvent | T, bytes]] | None:
    """Every event of an ingest request body, parsed, each with its JSON as it will be spooled:
    when the body is exactly ``{"events":[...]}`` in the canonical encoding and within the caps.
    A progress event the structs vouch for is read typed; any other (a plan, another kind)
    by ``other``, which returns it with its canonical encoding, and raises for anything else.
    None sends the body the exact way (:func:`~sparkwatch.collector.body.events_of` and the
    contract), which says what is wrong."""
    # A body over the lean decode size takes the exact way, which holds less of it at once: the
    # typed way keeps the body, each event's own copy and the parsed events together (a 16 MiB
    # body: +77 MiB in the collector, 4.8x the limit over idle, against the 4x bound).
    if len(raw) > LEAN_DECODE_BYTES or b"\\u0000" in raw or has_long_integer(raw):
        return None
    try:
        events = _BODY.decode(raw).events
        # The canonical body is the events' own bytes in the fewest characters JSON allows
        # around them: any other body that holds them (spaces, other keys, escapes) is longer.
        if len(events) > max_events or len(raw) != _framed(events):
            return None
        checked = [_canonical(event, other) for event in events]
    except Exception:  # noqa: BLE001 - refused, unsure, or a bug: the exact way tells which
        return None
    return checked


def _framed(events: list[msgspec.Raw]) -> int:
    """The length of ``{"events":[...]}`` holding ``events``, separated by commas."""
    return len(b'{"events":[]}') + sum(map(len, events)) + max(len(events) - 1, 0)


def _canonical(raw: msgspec.Raw, other: Callable[[bytes], tuple[T, bytes]]
               ) -> tuple[ParsedEvent | T, bytes]:
    """The event read typed, when its JSON is the canonical encoding of what was read; else
    read by ``other``, which holds it to the same."""
    if len(raw) > LIMITS.event_bytes:
        raise Unsure
    # Its own copy: the payload kept by the event then holds this event, never the whole body.
    data = bytes(raw)
    try:
        return _progress_of(data)
    except (*_REFUSED, Unsure):
        pass
    read, encoded = other(data)
    if encoded != data:
        raise Unsure
    return read, encoded


def _progress_of(data: bytes) -> tuple[ParsedEvent, bytes]:
    envelope = _ENVELOPE.decode(data)
    if envelope.kind != "progress":
        raise Unsure
    if _ENCODER.encode(envelope) != data:  # the payload is copied as it came: the rest is checked
        raise Unsure
    progress = _PROGRESS.decode(envelope.payload)
    if memoryview(envelope.payload) != _ENCODER.encode(progress):
        raise Unsure
    return _event(envelope, progress), data


def split_record(data: bytes) -> tuple[str | None, list[msgspec.Raw]] | None:
    """A spool record's tenant (None: the default, a bare list) and its events as JSON texts;
    None when it is not a record msgspec reads (the exact path decodes it)."""
    try:
        record = _RECORD.decode(data)
    except _REFUSED:
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
        return _event(envelope, _PROGRESS.decode(envelope.payload))
    except _REFUSED:
        raise Unsure from None


def _event(envelope: _Envelope, progress: _Progress) -> ParsedEvent:
    try:
        return ParsedEvent(Envelope(EventKind.PROGRESS, _app(envelope.app),
                                    envelope.received_at, RawPayload(envelope.payload)),
                           _progress(progress))
    except EventParseError:  # a timestamp
        raise Unsure from None


def _given(value: Any, default: Any) -> Any:
    return default if value is None or value is UNSET else value


def _app(app: _App) -> AppInfo:
    version = app.spark_version or ""
    _plain(app.name, app.id, version)
    return AppInfo(app.name, app.id, version)


def _progress(p: _Progress) -> QueryProgress:
    name = _given(p.name, None)
    _plain(p.id, p.run_id, name or "")
    if not (is_id(p.id) and is_id(p.run_id)):
        raise Unsure  # the exact parser names the id
    durations = _given(p.duration_ms, {})
    event_time = _given(p.event_time, None)
    progress = QueryProgress(
        query_id=p.id, run_id=p.run_id, name=name,
        timestamp=parse_timestamp(p.timestamp, "progress.timestamp", BATCH_TIME_END),
        batch_id=p.batch_id,
        batch_duration_ms=_given(p.batch_duration, durations.get("triggerExecution", 0)),
        num_input_rows=p.num_input_rows or 0,
        input_rows_per_second=_rate(p.input_rows_per_second),
        processed_rows_per_second=_rate(p.processed_rows_per_second),
        duration_ms=durations,
        event_time=parse_event_time(event_time),
        state_operators=tuple(_operator(op, i)
                              for i, op in enumerate(_given(p.state_operators, ()))),
        sources=tuple(_source(s, i) for i, s in enumerate(_given(p.sources, ()))),
        sink=None if p.sink is None or p.sink is UNSET else _sink(p.sink),
        observed_metrics=_given(p.observed_metrics, {}),
    )
    try:  # offsets, the eventTime map and user rows, free-form: as the exact way checks them
        check_kept(progress, {"eventTime": event_time} if event_time else {})
    except ContractViolation:
        raise Unsure from None
    return progress


def _operator(op: Any, index: int) -> StateOperator:
    name, *counters, custom = astuple(op)  # in the field table's order, in C
    name = name or "unknown"
    if len(name) > LIMITS.name_chars:
        raise Unsure
    if set(map(type, counters)) != _INT:
        _plain(name)  # the exact parser then checks the name's text too
        counters = [value or 0 for value in counters]
    return StateOperator(index, name, *counters,  # type: ignore[arg-type, call-arg]
                         _given(custom, {}))


def _source(s: _Source, index: int) -> SourceProgress:
    return SourceProgress(
        index=index, description=_text(s.description),
        start_offset=_given(s.start_offset, None), end_offset=_given(s.end_offset, None),
        latest_offset=_given(s.latest_offset, None),
        num_input_rows=s.num_input_rows or 0,
        input_rows_per_second=_rate(s.input_rows_per_second),
        processed_rows_per_second=_rate(s.processed_rows_per_second),
        metrics=_metrics(_given(s.metrics, {})),
    )


def _sink(s: _Sink) -> SinkProgress:
    return SinkProgress(
        description=_text(s.description),
        num_output_rows=_given(s.num_output_rows, -1),
        metrics=_metrics(_given(s.metrics, {})),
    )


def _rate(value: Any) -> float | None:
    if value is None or value is UNSET:
        return None
    if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
        raise Unsure
    number = float(value)
    if number < 0:
        raise Unsure  # the exact parser names the field
    return number if math.isfinite(number) else None


def _text(value: Any) -> str:
    if not value:
        return ""
    if len(value) > LIMITS.text_chars:
        raise Unsure
    _plain(value)
    return str(value)


def _metrics(metrics: dict[str, str]) -> dict[str, str]:
    if metrics and (max(map(len, metrics)) > LIMITS.key_chars
                    or max(map(len, metrics.values())) > LIMITS.text_chars):
        raise Unsure
    _plain(*metrics, *metrics.values())
    return metrics


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
