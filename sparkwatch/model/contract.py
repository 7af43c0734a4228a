"""The validation contract: what an event may hold, defined once for the listener, the collector's
ingest and its OpenAPI schema.

Whatever passes can be spooled, stored in SQLite and PostgreSQL and rendered in /metrics:
integers fit a signed 64-bit column (counts and sizes are never negative, as Spark's are not),
floats are finite, rates are not negative (rows over a duration), strings are valid Unicode with
neither NUL (PostgreSQL refuses it in text) nor lone surrogates (not encodable as UTF-8), every
string, map and array has a documented cap, and
nesting is shallow enough for every encoder on the way. A violation names the field path, e.g.
``stateOperators[1].numRowsTotal: 9223372036854775808 is out of range``.

The typed fields' types, ranges and caps are checked by :mod:`sparkwatch.model.parse` as it
reads them. The values themselves (text without NUL or lone surrogates, integers within 64 bits,
finite floats, nesting, duplicate keys) are vouched for in one of two ways: cheaply, on the raw
JSON (:func:`canonical_is_clean` at the collector; a scan of Spark's JSON in the listener), or,
when that cannot vouch for it, value by value over the whole event (:func:`check_tree`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkwatch.summary import quoted

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
"""Spark's Int fields (a plan's operator id and state store count): INTEGER columns."""

EARLIEST_EPOCH = -62135596800
"""0001-01-01T00:00:00Z, the first instant Python's datetime and SQL's timestamps hold."""
LATEST_EPOCH = 253402300799
"""9999-12-31T23:59:59Z, the last whole second both hold."""
TIME_END = LATEST_EPOCH + 1
"""10000-01-01T00:00:00Z: every time is before it."""
BATCH_TIME_END = 253370764800
"""9999-01-01T00:00:00Z: an event's own time (when Spark reported it) is before it, because the
history is partitioned and rolled up by day, with partitions made days ahead of the newest batch;
Spark's event-time fields (user data: ``9999-12-31`` is a common "no end" value) only need to be
before :data:`TIME_END`."""


class ContractViolation(ValueError):
    """A value the contract refuses; the message starts with the field path."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Every cap of the contract (characters for strings, entries for maps and arrays)."""

    id_chars: int = 128
    """query id, run id, app id (Spark's are 36-character UUIDs and ``app-…``/``local-…`` ids)"""
    name_chars: int = 256
    """app name, query name, operator name, spark version: they become label values"""
    key_chars: int = 256
    """custom metric, duration, source/sink metric, observed metric and offset keys (a Kafka
    topic name, an offset's key, may be 249 characters)"""
    text_chars: int = 4096
    """descriptions and source/sink metric values"""
    long_text_chars: int = 65536
    """a terminated query's exception (a stack trace) and any string the parser does not type
    (observed metrics, offsets, fields Spark adds later)"""
    operators: int = 64
    sources: int = 256
    map_entries: int = 256
    """custom metrics per operator, durations, metric maps, observed metrics, job tags"""
    depth: int = 32
    """JSON nesting of one event, envelope included"""
    event_bytes: int = 1 << 20
    """one event, encoded as compact JSON"""


LIMITS = Limits()


def fail(path: str, problem: str) -> ContractViolation:
    return ContractViolation(f"{path}: {problem}")


def check_count(value: int, path: str, minimum: int = 0) -> int:
    """An integer count or size: ``minimum`` (0, or -1 where Spark means "unknown") to int64."""
    if not minimum <= value <= INT64_MAX:
        raise fail(path, f"{quoted(value)} is out of range ({minimum}..{INT64_MAX})")
    return value


def check_int64(value: int, path: str) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise fail(path, f"{quoted(value)} is out of range (signed 64-bit)")
    return value


def check_float(value: float, path: str) -> float:
    if not math.isfinite(value):
        raise fail(path, f"{value!r} is not a finite number")
    return value


def check_rate(value: float, path: str, given: object) -> float:
    """Rows per second (finite: a NaN or infinite rate is unknown, read as null before), not
    negative: Spark divides a row count by a duration, the trigger's held at 1 ms or more for the
    processed rate, the time since the last trigger started for the input rate (negative only
    when the driver's clock steps back, which measures nothing: the listener makes it null)."""
    if not value >= 0:
        raise fail(path, f"{quoted(given)} is out of range (0 or more rows per second)")
    return value


def check_time(epoch: float, path: str, given: str, end: float = TIME_END) -> float:
    """Epoch seconds from ``EARLIEST_EPOCH`` to before ``end``, in UTC (an offset can carry a
    timestamp written within years 1 to 9999 past either end)."""
    if not EARLIEST_EPOCH <= epoch < end:
        last = "9998" if end <= BATCH_TIME_END else "9999"
        raise fail(path, f"{quoted(given)} is out of range (years 0001 to {last}, in UTC)")
    return epoch


def check_text(value: str, path: str, cap: int) -> str:
    """A string of at most ``cap`` characters, valid Unicode without NUL or lone surrogates."""
    if len(value) > cap:
        raise fail(path, f"string of {len(value)} characters is over the limit of {cap}")
    if "\x00" in value:
        raise fail(path, "string holds a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise fail(path, "string holds a lone surrogate (not valid Unicode)") from None
    return value


def is_id(value: str) -> bool:
    """A query or run id: printable, without ``/``, not ``.`` or ``..`` (Spark's are UUIDs), with
    no space at either end. It names the query in the console's and the read API's URLs, where a
    newline or a slash cannot be routed and browsers and HTTP clients resolve a dot segment away;
    an id with a trailing space looked, in every list, like the id without it (another tenant's)."""
    return value.isprintable() and "/" not in value and value not in (".", "..") \
        and value == value.strip()


def check_id(value: str, path: str) -> str:
    """:func:`is_id`, or a violation naming ``path``."""
    if not is_id(value):
        raise fail(path, f"{quoted(value)} is not an id (printable characters without '/', "
                   "not '.' or '..', no space at either end)")
    return value


def check_entries(size: int, path: str, cap: int, what: str = "entries") -> None:
    if size > cap:
        raise fail(path, f"{size} {what} is over the limit of {cap}")


def child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    # A key with a lone surrogate is refused by the check that follows, and the path names it in
    # the 4xx answer, which must still encode as UTF-8: the surrogate is shown escaped.
    shown = key if key.isascii() else key.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"{path}.{shown}" if path else shown


def check_tree(value: Any, path: str, depth: int = 1, limits: Limits = LIMITS) -> int:
    """Every value under ``value`` (free-form JSON): returns how many object keys it holds.

    Keys and strings as :func:`check_text` (keys at ``key_chars``, strings at
    ``long_text_chars``),
    integers within signed 64-bit, floats finite, nesting within ``limits.depth``, objects and
    arrays within ``map_entries``… arrays of numbers may be longer (offsets of many partitions),
    bounded by the event size.
    """
    kind = type(value)
    if kind is dict or isinstance(value, Mapping):
        if depth > limits.depth:
            raise fail(path, f"nested deeper than the limit of {limits.depth} levels")
        duplicates = getattr(value, "duplicates", None)
        if duplicates:
            raise fail(child(path, duplicates[0]), "duplicate key in one JSON object")
        keys = len(value)
        for key, item in value.items():
            # A plain key over a plain value (an offset's partition) is cleared without making
            # the path that only an error shows: that cost most of a Kafka offset's check.
            if _plain_key(key, limits) and _plain_leaf(item, limits):
                continue
            here = child(path, key)
            check_text(key, here, limits.key_chars)
            keys += check_tree(item, here, depth + 1, limits)
        return keys
    if kind is list:
        if depth > limits.depth:
            raise fail(path, f"nested deeper than the limit of {limits.depth} levels")
        return sum(check_tree(item, child(path, i), depth + 1, limits)
                   for i, item in enumerate(value) if not _plain_leaf(item, limits))
    if kind is str:
        check_text(value, path, limits.long_text_chars)
    elif kind is int:
        check_int64(value, path)
    elif kind is float:
        check_float(value, path)
    elif value is not None and kind is not bool:
        raise fail(path, f"unexpected JSON value of type {kind.__name__}")
    return 0


def _plain_key(key: Any, limits: Limits) -> bool:
    return type(key) is str and len(key) <= limits.key_chars and key.isascii() \
        and "\x00" not in key


def _plain_leaf(value: Any, limits: Limits) -> bool:
    """A value :func:`check_tree` clears at once: an integer within 64 bits, a short ASCII string
    without NUL, null or a boolean (anything else takes the full check, which names the path)."""
    kind = type(value)
    if kind is int:
        return INT64_MIN <= value <= INT64_MAX
    if kind is str:
        return len(value) <= limits.long_text_chars and value.isascii() and "\x00" not in value
    return value is None or kind is bool


RATE_KEYS = ("inputRowsPerSecond", "processedRowsPerSecond")


def normalize_rates(payload: Any) -> None:
    """Rates that are NaN or infinite mean "unknown": Spark's own JSON leaves them out, PySpark's
    writes ``NaN``. They become null (absent) here, so that no non-finite float is stored, and
    the rest of the contract holds every float finite."""
    if type(payload) is not dict:
        return
    sources = payload.get("sources")
    for holder in (payload, *(sources if type(sources) is list else ())):
        if type(holder) is not dict:
            continue
        for key in RATE_KEYS:
            value = holder.get(key)
            if type(value) is float and not math.isfinite(value):
                holder[key] = None


_CONTAINERS = (dict, list)


def canonical_is_clean(raw: bytes | bytearray, canonical: bytes) -> bool:
    """Whether JSON text ``raw``, which a strict decoder (no NaN, no lone surrogates, valid
    UTF-8) read, needs no value-by-value check, given ``canonical``: what the decoded document
    encodes back to.

    When the two are the same bytes, no key was lost to a duplicate (the canonical encoding of
    the decoded document names each key once), and no value was spelled in a way the encoder
    would not write. What remains is a ``\\u0000`` escape and an integer literal too long for 64
    bits. Bodies written otherwise (spaced, escaped, or by another encoder) are only slower: they
    take the exact check.
    """
    return raw == canonical and b"\\u0000" not in raw and not has_long_integer(raw)


def has_long_integer(raw: bytes | bytearray) -> bool:
    """A run of 19 or more digits (signed 64-bit holds at most 19): found in C by mapping every
    digit to ``1`` and everything else to ``0``; a string with a long digit run (rare) only
    sends the body to the exact check."""
    return _LONG_RUN in raw.translate(_DIGIT_MAP)


_DIGIT_MAP = bytes(0x31 if 0x30 <= b <= 0x39 else 0x30 for b in range(256))
_LONG_RUN = b"1" * 19


class DuplicateKeys(dict):  # type: ignore[type-arg]
    """A JSON object that named a key twice (as read by :func:`object_with_duplicates`)."""

    duplicates: list[str]


def object_with_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for the standard library's decoder: a plain dict, or a
    :class:`DuplicateKeys` that remembers which keys came twice (plain decoding keeps the last
    silently), for :func:`check_tree` to refuse with the path."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen: set[str] = set()
    twice = [key for key, _ in pairs if key in seen or seen.add(key)]  # type: ignore[func-returns-value]
    marked = DuplicateKeys(obj)
    marked.duplicates = twice
    return marked


def check_envelope(item: Any) -> None:
    """Everything of one wire event (``{kind, app, received_at, payload}``) the typed parse does
    not check by itself: duplicate keys, nesting, and every value of the free-form payload.
    Payload paths are written from the payload (``stateOperators[1].numRowsTotal``)."""
    if not isinstance(item, Mapping):
        return  # the parser names what is wrong with it
    duplicates = getattr(item, "duplicates", None)
    if duplicates:
        raise fail(child("event", duplicates[0]), "duplicate key in one JSON object")
    check_tree({k: v for k, v in item.items() if k != "payload"}, "event")
    payload = item.get("payload")
    if isinstance(payload, Mapping):
        normalize_rates(payload)
        check_tree(payload, "", depth=2)


# --- the listener's side: Spark's own JSON made to fit, never refused ---------------------------

ELLIPSIS = "\u2026"
_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, every surrogate code point is lone


def fit(value: str, cap: int) -> str:
    """``value`` as valid text within ``cap`` characters: NUL and lone surrogates replaced
    (U+FFFD), the rest cut with an ellipsis."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    if not value.isascii():
        value = _SURROGATE.sub("\ufffd", value)
    return value if len(value) <= cap else value[: cap - 1] + ELLIPSIS


def conform(payload: Any, limits: Limits = LIMITS) -> Any:
    """A copy of Spark's event JSON that meets the contract: what the listener does before it
    exports or writes, so that a driver never sends what a collector would refuse. Strings are
    fitted (names to ``name_chars``, descriptions to ``text_chars``), non-finite floats become
    null, integers are clamped to 64 bits and what nests too deep is dropped."""
    cleaned = _conform(payload, 2, limits)
    if type(cleaned) is not dict:
        return cleaned
    _unclock(cleaned)
    _fit_keys(cleaned, (("name", limits.name_chars), ("id", limits.id_chars),
                        ("runId", limits.id_chars)))
    for op in _dicts(cleaned.get("stateOperators")):
        _fit_keys(op, (("operatorName", limits.name_chars),))
    for holder in (*_dicts(cleaned.get("sources")), *_dicts([cleaned.get("sink")])):
        _fit_keys(holder, (("description", limits.text_chars),))
        metrics = holder.get("metrics")
        if type(metrics) is dict:
            _fit_keys(metrics, tuple((k, limits.text_chars) for k in metrics))
    return cleaned


def _unclock(progress: dict[str, Any]) -> None:
    """Spark times triggers by the driver's wall clock (``SystemClock``): when it steps back, the
    input rate (rows over the time since the last trigger started) and ``batchDuration`` (the
    trigger's end minus its start) come out negative and measure nothing. The rates become
    unknown (null, as a NaN one), the duration is left to the parser's default,
    ``durationMs.triggerExecution``, which Spark never reports below 0."""
    for holder in (progress, *_dicts(progress.get("sources"))):
        for key in RATE_KEYS:
            if _negative(holder.get(key)):
                holder[key] = None
    if _negative(progress.get("batchDuration")):
        progress["batchDuration"] = None


def _negative(value: Any) -> bool:
    return type(value) in (int, float) and value < 0


def _conform(value: Any, depth: int, limits: Limits) -> Any:
    kind = type(value)
    if kind in _CONTAINERS and depth > limits.depth:
        return None
    if kind is dict:
        return {fit(str(k), limits.key_chars): _conform(v, depth + 1, limits)
                for k, v in value.items()}
    if kind is list:
        return [_conform(v, depth + 1, limits) for v in value]
    if kind is str:
        return fit(value, limits.long_text_chars)
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is int:
        return min(max(value, INT64_MIN), INT64_MAX)
    return value


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if type(v) is dict] if type(value) is list else []


def _fit_keys(holder: dict[str, Any], caps: tuple[tuple[str, int], ...]) -> None:
    for key, cap in caps:
        value = holder.get(key)
        if type(value) is str:
            holder[key] = fit(value, cap)


# --- the contract as JSON Schema (the collector's OpenAPI) --------------------------------------


def _text_schema(cap: int, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "maxLength": cap, **extra}


def _count_schema(minimum: int = 0) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": INT64_MAX}


_RATE_SCHEMA = {"minimum": 0, "description": "rows per second; null, absent, NaN or Infinity "
                "(a number or its name as a string) when unknown"}
"""No type: a rate may also be null or the name of a non-finite number."""


def envelope_schema(limits: Limits = LIMITS) -> dict[str, Any]:
    """One wire event as JSON Schema, from the same limits the code enforces. Strings must also
    hold no NUL and no lone surrogate, and floats be finite, which JSON Schema cannot say."""
    from sparkwatch.model.fields import OPERATOR_FIELDS  # the table imports nothing of ours

    metrics = {"type": "object", "maxProperties": limits.map_entries,
               "propertyNames": {"maxLength": limits.key_chars},
               "additionalProperties": {"type": "integer", "minimum": INT64_MIN,
                                        "maximum": INT64_MAX}}
    operator = {"type": "object", "properties": {
        "operatorName": _text_schema(limits.name_chars),
        **{f.json: {**_count_schema(f.minimum), "description": f"{f.help} ({f.unit})"}
           for f in OPERATOR_FIELDS},
        "customMetrics": metrics,
    }}
    source = {"type": "object", "properties": {
        "numInputRows": _count_schema(),
        "inputRowsPerSecond": _RATE_SCHEMA, "processedRowsPerSecond": _RATE_SCHEMA,
    }}
    progress = {"type": "object", "description": "Spark's StreamingQueryProgress JSON "
                "(started, idle and terminated events carry Spark's JSON of those events).",
                "properties": {
                    "id": _text_schema(limits.id_chars), "runId": _text_schema(limits.id_chars),
                    "name": {**_text_schema(limits.name_chars), "nullable": True},
                    "batchId": _count_schema(), "batchDuration": _count_schema(),
                    "numInputRows": _count_schema(),
                    "inputRowsPerSecond": _RATE_SCHEMA, "processedRowsPerSecond": _RATE_SCHEMA,
                    "stateOperators": {"type": "array", "maxItems": limits.operators,
                                       "items": operator},
                    "sources": {"type": "array", "maxItems": limits.sources, "items": source},
                }}
    return {
        "type": "object", "required": ["kind", "app", "received_at", "payload"],
        "description": f"At most {limits.event_bytes} bytes as compact JSON, nested at most "
                       f"{limits.depth} levels; strings hold no NUL and no lone surrogate, "
                       "numbers are finite. Fields not named here are kept as they are.",
        "properties": {
            "kind": {"type": "string", "enum": ["started", "progress", "idle", "terminated"]},
            "app": {"type": "object", "required": ["name", "id"], "properties": {
                "name": _text_schema(limits.name_chars, minLength=1),
                "id": _text_schema(limits.id_chars, minLength=1),
                "spark_version": _text_schema(limits.name_chars)}},
            "received_at": {"type": "number", "minimum": 0, "maximum": 253402300799,
                            "description": "epoch seconds"},
            "payload": progress,
        },
    }
