"""The one parser from Spark's event JSON to the event model.

Tolerant of what Spark legitimately omits (NaN rates, empty maps, no-data batches, batch 0, fields
that differ between 3.5 and 4.x) and strict about what is wrong: a value of the wrong type, or one
the validation contract (:mod:`sparkwatch.model.contract`) refuses, raises :class:`EventParseError`
naming the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from sparkwatch.model.contract import (
    BATCH_TIME_END,
    INT64_MAX,
    LATEST_EPOCH,
    LIMITS,
    TIME_END,
    ContractViolation,
    check_count,
    check_entries,
    check_float,
    check_id,
    check_int64,
    check_rate,
    check_text,
    check_time,
    check_tree,
    conform,
    fit,
    has_long_integer,
    is_id,
    normalize_rates,
)
from sparkwatch.model.events import (
    AppInfo,
    Envelope,
    EventKind,
    EventTime,
    JsonValue,
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
from sparkwatch.model.fields import OPERATOR_FIELDS


class EventParseError(ContractViolation):
    """Spark event JSON that cannot be turned into an event; the message names the field."""


_TIMESTAMP_CHARS = 64


def parse_timestamp(value: Any, where: str, end: float = TIME_END) -> float:
    """Spark's ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` (UTC) to epoch seconds, before ``end``
    (:data:`~sparkwatch.model.contract.BATCH_TIME_END` for an event's own time)."""
    if not isinstance(value, str):
        raise EventParseError(f"{where}: expected an ISO-8601 timestamp string, got {value!r}")
    if len(value) > _TIMESTAMP_CHARS:
        raise EventParseError(f"{where}: not an ISO-8601 timestamp ({len(value)} characters)")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        # A time without a zone would be read in the local zone of whichever process parses
        # it (the collector's, the driver's): the same event stored hours apart.
        zoned = parsed.tzinfo is not None
        epoch = parsed.timestamp()
    except (ValueError, OverflowError):
        raise EventParseError(f"{where}: not an ISO-8601 timestamp: {value!r}") from None
    if not zoned:
        raise EventParseError(f"{where}: an ISO-8601 timestamp without a zone: {value!r} "
                              "(Spark writes UTC, ending in Z)")
    try:
        return check_time(epoch, where, value, end)
    except ContractViolation as exc:
        raise EventParseError(str(exc)) from None


def _obj(data: Any, where: str) -> Mapping[str, Any]:
    if type(data) is dict:  # what JSON decoding gives: skips the ABC check (~14 calls per event)
        return data
    if not isinstance(data, Mapping):
        raise EventParseError(f"{where}: expected a JSON object, got {type(data).__name__}")
    return data


def _checked(check: Any, *args: Any) -> Any:
    """A contract check whose violation is raised as this module's error."""
    try:
        return check(*args)
    except ContractViolation as exc:
        raise EventParseError(str(exc)) from None


def _required_str(
    data: Mapping[str, Any], key: str, where: str, cap: int = LIMITS.id_chars
) -> str:
    value = data.get(key)
    if type(value) is str and 0 < len(value) <= cap and value.isascii() and "\x00" not in value:
        return value  # the common case, in C
    if not isinstance(value, str) or not value:
        raise EventParseError(f"{where}.{key}: required string is missing or not a string")
    return _checked(check_text, value, f"{where}.{key}", cap)


def _id(data: Mapping[str, Any], key: str, where: str) -> str:
    value = _required_str(data, key, where)
    if is_id(value):
        return value
    try:
        return check_id(value, f"{where}.{key}")
    except ContractViolation as exc:
        raise EventParseError(str(exc)) from None


def _opt_str(
    data: Mapping[str, Any], key: str, where: str, cap: int = LIMITS.name_chars
) -> str | None:
    value = data.get(key)
    if value is None or (type(value) is str and len(value) <= cap and value.isascii()
                         and "\x00" not in value):
        return value  # the common cases, in C
    if isinstance(value, str):
        return _checked(check_text, value, f"{where}.{key}", cap)
    raise EventParseError(f"{where}.{key}: expected a string or null, got {value!r}")


def _text(data: Mapping[str, Any], key: str, where: str, cap: int = LIMITS.text_chars) -> str:
    """An optional free-text string ("" when absent)."""
    value = data.get(key)
    if not value:
        return ""
    if not isinstance(value, str):
        raise EventParseError(f"{where}.{key}: expected a string, got {value!r}")
    return _checked(check_text, value, f"{where}.{key}", cap)


def _as_int(value: Any, path: str, minimum: int) -> int:
    """An integer (or a float holding one exactly) from ``minimum`` to signed 64-bit."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EventParseError(f"{path}: expected an integer, got {value!r}")
    if isinstance(value, float):
        if not value.is_integer():  # NaN and the infinities included
            raise EventParseError(f"{path}: expected an integer, got {value!r}")
        value = int(value)
    return _checked(check_count, value, path, minimum)


def _int(
    data: Mapping[str, Any], key: str, where: str, default: int = 0, minimum: int = 0
) -> int:
    value = data.get(key, default)
    if type(value) is int and minimum <= value <= INT64_MAX:  # the common case, checked first
        return value
    if value is None:
        return default
    return _as_int(value, f"{where}.{key}", minimum)


def _required_int(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key)
    if type(value) is int and 0 <= value <= INT64_MAX:
        return value
    if value is None:
        raise EventParseError(f"{where}.{key}: required integer is missing or null")
    return _as_int(value, f"{where}.{key}", 0)


def _rate(data: Mapping[str, Any], key: str, where: str) -> float | None:
    """Rates are omitted by Spark when NaN or infinite (unknown: None); some writers send them as
    strings. A known rate is never negative (:func:`~sparkwatch.model.contract.check_rate`)."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EventParseError(f"{where}.{key}: expected a number, got {value!r}")
    if isinstance(value, int):
        _checked(check_int64, value, f"{where}.{key}")
    number = float(value)
    if not math.isfinite(number):
        return None
    return number if number >= 0 else _checked(check_rate, number, f"{where}.{key}", value)


_NUMBER_TYPES = frozenset((int, float))
_STR_TYPE = frozenset((str,))


def _number_map(data: Mapping[str, Any], key: str, where: str) -> dict[str, int | float]:
    raw = data.get(key) or {}
    # Fast path for what JSON decoding gives (str keys, int/float values), checked in C:
    # customMetrics has ~40 keys per RocksDB operator and this runs for every operator of every
    # event the collector ingests. Text and range are the contract's value checks (a NUL, a lone
    # surrogate, an integer beyond 64 bits, a NaN), made on the raw body or the whole tree
    # before the parser runs; anything else takes the checking loop below.
    if (type(raw) is dict and len(raw) <= LIMITS.map_entries
            and set(map(type, raw.values())) <= _NUMBER_TYPES and set(map(type, raw)) <= _STR_TYPE
            and (not raw or max(map(len, raw)) <= LIMITS.key_chars)):
        return raw  # shared with the payload, not copied: neither is ever mutated
    path = f"{where}.{key}"
    items = _obj(raw, path)
    _checked(check_entries, len(items), path, LIMITS.map_entries)
    out: dict[str, int | float] = {}
    for name, value in items.items():
        here = f"{path}.{name}"
        _checked(check_text, str(name), f"{path}[{name!r}]", LIMITS.key_chars)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EventParseError(f"{here}: expected a number, got {value!r}")
        out[str(name)] = (_checked(check_int64, value, here) if isinstance(value, int)
                          else _checked(check_float, value, here))
    return out


def _plain_key(key: str) -> bool:
    """No NUL and no lone surrogate (ASCII keys, Spark's, answer in C)."""
    return "\x00" not in key if key.isascii() else _valid_text(key)


def _valid_text(value: str) -> bool:
    try:
        check_text(value, "", len(value))
    except ContractViolation:
        return False
    return True


def _string_map(data: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    raw = data.get(key) or {}
    path = f"{where}.{key}"
    items = _obj(raw, path)
    _checked(check_entries, len(items), path, LIMITS.map_entries)
    out = {}
    for name, value in items.items():
        name = _checked(check_text, str(name), f"{path}[{name!r}]", LIMITS.key_chars)
        text = "" if value is None else value if isinstance(value, str) else _scalar(value)
        out[name] = _checked(check_text, text, f"{path}.{name}", LIMITS.text_chars)
    return out


def _scalar(value: Any) -> str:
    """A metric value Spark sent as a number (it sends strings; other writers may not)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, int | float | bool):
        return str(value)
    return json.dumps(value)[: LIMITS.text_chars + 1]


def _opt_time(data: Mapping[str, Any], key: str, where: str) -> float | None:
    value = data.get(key)
    return None if value is None else parse_timestamp(value, f"{where}.{key}")


# StateOperatorProgress fields, in StateOperator's field order after index and name.
_OPERATOR_KEYS = tuple(f.json for f in OPERATOR_FIELDS)
_INT_TYPE = frozenset((int,))


def parse_state_operator(data: Any, index: int) -> StateOperator:
    where = f"stateOperators[{index}]"
    op = _obj(data, where)
    counters: list[Any] = list(map(op.get, _OPERATOR_KEYS))
    name = op.get("operatorName") or "unknown"
    if (set(map(type, counters)) <= _INT_TYPE and min(counters) >= 0
            and type(name) is str and len(name) <= LIMITS.name_chars):
        # Every counter present, an exact int and not negative (what Spark sends), checked in C
        # (64 bits and the name's text are the contract's value checks, made before); anything
        # else (missing, null, float, wrong type) takes the field-by-field checks below.
        # (positional: the field table's order, which mypy cannot count through a starred list)
        return StateOperator(index, name, *counters,  # type: ignore[arg-type, call-arg]
                             _number_map(op, "customMetrics", where))
    return StateOperator(  # type: ignore[call-arg]
        index,
        # 3.4/3.5 session windows report "defaultName"; keep what Spark says, the catalogue maps it.
        _opt_str(op, "operatorName", where) or "unknown",
        *(_int(op, f.json, where, minimum=f.minimum)  # type: ignore[arg-type]
          for f in OPERATOR_FIELDS),
        _number_map(op, "customMetrics", where),
    )


def parse_source(data: Any, index: int) -> SourceProgress:
    where = f"sources[{index}]"
    src = _obj(data, where)
    return SourceProgress(
        index=index,
        description=_text(src, "description", where),
        start_offset=src.get("startOffset"),
        end_offset=src.get("endOffset"),
        latest_offset=src.get("latestOffset"),
        num_input_rows=_int(src, "numInputRows", where),
        input_rows_per_second=_rate(src, "inputRowsPerSecond", where),
        processed_rows_per_second=_rate(src, "processedRowsPerSecond", where),
        metrics=_string_map(src, "metrics", where),
    )


def parse_sink(data: Any) -> SinkProgress | None:
    if data is None:
        return None
    sink = _obj(data, "sink")
    return SinkProgress(
        description=_text(sink, "description", "sink"),
        num_output_rows=_int(sink, "numOutputRows", "sink", default=-1, minimum=-1),
        metrics=_string_map(sink, "metrics", "sink"),
    )


def parse_event_time(data: Any) -> EventTime:
    et = _obj(data or {}, "eventTime")
    return EventTime(
        min=_opt_time(et, "min", "eventTime"),
        max=_opt_time(et, "max", "eventTime"),
        avg=_opt_time(et, "avg", "eventTime"),
        watermark=_opt_time(et, "watermark", "eventTime"),
    )


def _list(data: Mapping[str, Any], key: str, cap: int) -> list[Any]:
    value = data.get(key) or []
    if not isinstance(value, list):
        raise EventParseError(f"progress.{key}: expected a JSON array, got {type(value).__name__}")
    if len(value) > cap:
        _checked(check_entries, len(value), f"progress.{key}", cap)
    return value


def _durations(data: Mapping[str, Any], where: str) -> dict[str, int]:
    """``durationMs``: milliseconds per trigger phase, whole and never negative."""
    durations = _number_map(data, "durationMs", where)
    return {k: v if type(v) is int and v >= 0 else _as_int(v, f"{where}.durationMs.{k}", 0)
            for k, v in durations.items()}


def _observed(data: Mapping[str, Any]) -> dict[str, dict[str, JsonValue]]:
    """``observedMetrics``: free-form rows by name (their values are checked by the contract's
    tree walk, as every part of the payload the parser does not type)."""
    path = "progress.observedMetrics"
    observed = _obj(data.get("observedMetrics") or {}, path)
    _checked(check_entries, len(observed), path, LIMITS.map_entries)
    return {_checked(check_text, str(k), f"{path}[{k!r}]", LIMITS.key_chars):
            dict(_obj(v, f"{path}.{k}")) for k, v in observed.items()}


def parse_progress(data: Any) -> QueryProgress:
    """A ``StreamingQueryProgress`` JSON object (also accepts Spark's ``{"progress": ...}``)."""
    p = _obj(data, "progress")
    if "progress" in p and "batchId" not in p:
        p = _obj(p["progress"], "progress")
    where = "progress"
    durations = _durations(p, where)
    return QueryProgress(
        query_id=_id(p, "id", where),
        run_id=_id(p, "runId", where),
        name=_opt_str(p, "name", where),
        timestamp=parse_timestamp(p.get("timestamp"), "progress.timestamp",
                              BATCH_TIME_END),
        # Every progress Spark reports is of a batch: one without was stored as batch -1.
        batch_id=_required_int(p, "batchId", where),
        # Spark 3.5's JSON has no batchDuration (4.x has): triggerExecution measures the same
        # span (within a few ms on 4.x), so 3.5 batches do not all look 0 s long.
        batch_duration_ms=_int(
            p, "batchDuration", where, default=durations.get("triggerExecution", 0)
        ),
        num_input_rows=_int(p, "numInputRows", where),
        input_rows_per_second=_rate(p, "inputRowsPerSecond", where),
        processed_rows_per_second=_rate(p, "processedRowsPerSecond", where),
        duration_ms=durations,
        event_time=parse_event_time(p.get("eventTime")),
        state_operators=tuple(
            parse_state_operator(op, i)
            for i, op in enumerate(_list(p, "stateOperators", LIMITS.operators))
        ),
        sources=tuple(
            parse_source(s, i) for i, s in enumerate(_list(p, "sources", LIMITS.sources))
        ),
        sink=parse_sink(p.get("sink")),
        observed_metrics=_observed(p),
    )


def parse_started(data: Any) -> QueryStarted:
    d = _obj(data, "started")
    tags = d.get("jobTags") or []
    if not isinstance(tags, list):
        raise EventParseError(f"started.jobTags: expected a JSON array, got {tags!r}")
    _checked(check_entries, len(tags), "started.jobTags", LIMITS.map_entries)
    return QueryStarted(
        query_id=_id(d, "id", "started"),
        run_id=_id(d, "runId", "started"),
        name=_opt_str(d, "name", "started"),
        timestamp=parse_timestamp(d.get("timestamp"), "started.timestamp",
                              BATCH_TIME_END),
        job_tags=tuple(sorted(
            _checked(check_text, str(t), f"started.jobTags[{i}]", LIMITS.name_chars)
            for i, t in enumerate(tags))),
    )


def parse_idle(data: Any) -> QueryIdle:
    d = _obj(data, "idle")
    return QueryIdle(
        query_id=_id(d, "id", "idle"),
        run_id=_id(d, "runId", "idle"),
        timestamp=parse_timestamp(d.get("timestamp"), "idle.timestamp",
                              BATCH_TIME_END),
    )


def parse_terminated(data: Any) -> QueryTerminated:
    d = _obj(data, "terminated")
    return QueryTerminated(
        query_id=_id(d, "id", "terminated"),
        run_id=_id(d, "runId", "terminated"),
        exception=_opt_str(d, "exception", "terminated", LIMITS.long_text_chars),
        error_class=_opt_str(d, "errorClassOnException", "terminated"),
    )


_PARSERS: dict[EventKind, Callable[[Any], QueryEvent]] = {
    EventKind.STARTED: parse_started,
    EventKind.PROGRESS: parse_progress,
    EventKind.IDLE: parse_idle,
    EventKind.TERMINATED: parse_terminated,
}


def parse_payload(kind: EventKind | str, payload: Any) -> QueryEvent:
    try:
        parser = _PARSERS[EventKind(kind)]
    except ValueError:
        known = ", ".join(k.value for k in EventKind)
        raise EventParseError(
            f"kind: unknown event kind {kind!r} (expected one of {known})"
        ) from None
    return parser(payload)


def parse_envelope(envelope: Envelope) -> ParsedEvent:
    return ParsedEvent(envelope=envelope, event=parse_payload(envelope.kind, envelope.payload))


def envelope_from_json(
    kind: EventKind | str, raw_json: str, app: AppInfo, received_at: float
) -> Envelope:
    """Build an envelope from the JSON string the listener took from Spark, unwrapping progress."""
    payload = _unwrapped(kind, _loads(kind, raw_json))
    return Envelope(kind=EventKind(kind), app=app, received_at=received_at, payload=payload)


def _loads(kind: EventKind | str, raw_json: str) -> Any:
    try:
        return json.loads(raw_json)
    except json.JSONDecodeError as exc:
        raise EventParseError(f"{kind}: event is not valid JSON ({exc.msg} at {exc.pos})") from None
    except RecursionError:
        raise EventParseError(f"{kind}: event is JSON nested too deeply") from None


def _unwrapped(kind: EventKind | str, doc: Any) -> Mapping[str, Any]:
    payload = _obj(doc, str(kind))
    if kind == EventKind.PROGRESS and "progress" in payload and "batchId" not in payload:
        payload = _obj(payload["progress"], "progress")
    return payload


def listener_event(
    kind: EventKind | str, raw_json: str, app: AppInfo, received_at: float
) -> ParsedEvent:
    """The listener's way in: Spark's JSON to an event that meets the validation contract, the
    same the collector enforces. Spark's own values are made to fit
    (:func:`~sparkwatch.model.contract.conform`: a long name is cut, a NaN becomes null)
    rather than refused; what still cannot be read raises :class:`EventParseError`."""
    doc = _loads(kind, raw_json)
    envelope = Envelope(EventKind(kind), fitted_app(app), received_at, _unwrapped(kind, doc))
    normalize_rates(envelope.payload)
    try:
        if not _raw_clean(raw_json):
            check_tree(envelope.payload, "", depth=2)
            return parse_envelope(envelope)
        parsed = parse_envelope(envelope)
        if isinstance(parsed.event, QueryProgress):
            check_kept(parsed.event, {})  # user data: observed rows, a Python source's offsets
        return parsed
    except ContractViolation:
        fitted = Envelope(envelope.kind, envelope.app, envelope.received_at,
                          conform(envelope.payload))
        try:
            check_tree(fitted.payload, "", depth=2)
        except ContractViolation as exc:
            raise EventParseError(str(exc)) from None
        return parse_envelope(fitted)


def check_kept(progress: QueryProgress, extra: Mapping[str, Any]) -> None:
    """What a progress event keeps as it came, value by value: its user rows, its sources'
    offsets and ``extra`` (payload fields held as they came: the ``eventTime`` map, fields the
    parser does not know). A canonical body vouches for their values, not for how deep they
    nest nor how long their keys and strings are: an offset 600 levels deep was acknowledged,
    then failed the history writer."""
    if progress.observed_metrics:
        check_tree(progress.observed_metrics, "observedMetrics", depth=3)
    for source in progress.sources:
        for key, value in (("startOffset", source.start_offset),
                           ("endOffset", source.end_offset),
                           ("latestOffset", source.latest_offset)):
            if value is not None:
                check_tree(value, f"sources[{source.index}].{key}", depth=5)
    if extra:
        check_tree(extra, "", depth=2)


_UNSTRICT = (b"NaN", b"Infinity", b"\\ud", b"\\uD", b"\\u0000")


def _raw_clean(raw_json: str) -> bool:
    """Spark's JSON needs no value-by-value check unless it holds what a strict decoder refuses
    (NaN literals, lone surrogates), a NUL or an integer too long for 64 bits (a legal surrogate
    pair or a name holding "NaN" only costs the check). Spark's JSON writers name each key once
    and nest its own fields a few levels deep; what users write is checked by
    :func:`check_kept`."""
    try:
        raw = raw_json.encode()
    except UnicodeEncodeError:
        return False
    return not (any(marker in raw for marker in _UNSTRICT) or has_long_integer(raw))


def fitted_app(app: AppInfo) -> AppInfo:
    """``app`` cut to what every event of it carries (names and ids become label values)."""
    name, app_id = fit(app.name, LIMITS.name_chars), fit(app.id, LIMITS.id_chars)
    version = fit(app.spark_version, LIMITS.name_chars)
    if (name, app_id, version) == (app.name, app.id, app.spark_version):
        return app
    return AppInfo(name or "unknown", app_id or "unknown", version)


def envelope_to_dict(envelope: Envelope) -> dict[str, JsonValue]:
    """The wire form of an envelope (pushed to the collector, kept in spools)."""
    return {
        "kind": envelope.kind.value,
        "app": {
            "name": envelope.app.name,
            "id": envelope.app.id,
            "spark_version": envelope.app.spark_version,
        },
        "received_at": envelope.received_at,
        "payload": envelope.payload,
    }


_KINDS = frozenset(k.value for k in EventKind)


def envelope_from_dict(data: Any) -> Envelope:
    """Inverse of :func:`envelope_to_dict`, validating the envelope (not yet the payload)."""
    d = _obj(data, "event")
    app = _obj(d.get("app"), "event.app")
    received_at = d.get("received_at")
    if (isinstance(received_at, bool) or not isinstance(received_at, int | float)
            or not 0 <= received_at <= LATEST_EPOCH):
        raise EventParseError(f"event.received_at: expected epoch seconds, got {received_at!r}")
    kind = d.get("kind")
    if kind not in _KINDS:
        raise EventParseError(f"event.kind: unknown event kind {kind!r}")
    return Envelope(
        kind=EventKind(kind),
        app=AppInfo(
            name=_required_str(app, "name", "event.app", LIMITS.name_chars),
            id=_required_str(app, "id", "event.app"),
            spark_version=_text(app, "spark_version", "event.app", LIMITS.name_chars),
        ),
        received_at=float(received_at),
        payload=_obj(d.get("payload"), "event.payload"),
    )
