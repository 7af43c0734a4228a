"""JSON through orjson where it is installed (the collector has it; a Spark driver may not), the
standard library otherwise: one fast path, with its one fallback, for every room."""

from __future__ import annotations

import json
import math
from typing import Any

try:  # optional C codec, several times faster on progress events and custom-metric maps
    import orjson as _orjson
except ImportError:  # pragma: no cover - the standard library alone
    _orjson = None  # type: ignore[assignment]

LEAN_DECODE_BYTES = 4 << 20
"""Documents larger than this are decoded by the standard library: orjson first parses the whole
document into a tree of its own (about twice the document again), the standard library builds
the objects as it reads (a 16 MiB body: +18 MiB of peak memory instead of +42, 105 ms instead of
65)."""


def loads(data: bytes | bytearray) -> Any:
    """The document; NaN and Infinity literals (which orjson refuses) are read too."""
    if _orjson is not None and len(data) <= LEAN_DECODE_BYTES:
        try:
            return _orjson.loads(data)
        except _orjson.JSONDecodeError:  # NaN/Infinity literals: the standard library reads
            pass
    return json.loads(data)


def dumps_text(value: Any) -> str:
    """Compact JSON text: orjson's where it takes the value, else the standard library's (a key
    that is not a string, an integer over 64 bits, a lone surrogate, or no orjson installed).
    The history's engines write their JSON columns with it (``json_serializer``) as COPY does:
    the writers hand it JSON-safe values (:func:`~sparkwatch.history.rows.json_safe`), for which
    both give the same document."""
    text = try_dumps(value)
    if text is not None:
        return text.decode()
    return json.dumps(value, separators=(",", ":"))


def try_dumps(value: Any) -> bytes | None:
    """Compact JSON by orjson as it is, or None where orjson is missing or refuses the value (a
    key that is not a string, a type it does not know): the caller then makes it JSON-safe."""
    if _orjson is None:
        return None
    try:
        return _orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        return None


def dumps_strict(value: Any, indent: int | None = 2) -> str:
    """JSON proper for a reader (``jq``, a parser without NaN): a non-finite float anywhere in
    ``value`` is written as null, as the collector's read API answers the same history (its
    responses are Pydantic's JSON, which writes NaN and the infinities as null): the CLI's
    ``--format json`` and the API give one answer. One pass where every float is finite (the
    common case); only a value ``json.dumps`` refuses is copied by :func:`finite` (the copy on
    every call cost 0.68 s for 50,000 state points)."""
    try:
        return json.dumps(value, indent=indent, allow_nan=False)
    except ValueError:  # "Out of range float values are not JSON compliant"
        return json.dumps(finite(value), indent=indent, allow_nan=False)


def finite(value: Any) -> Any:
    """``value`` with every non-finite float, however deep in dicts, lists and tuples, as None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value
