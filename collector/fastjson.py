"""JSON on the collector's hot path: orjson (a C codec, several times faster on progress events)
and, for what orjson cannot vouch for, the standard library with duplicate keys kept visible."""

from __future__ import annotations

import json
from typing import Any

import orjson

from sparkwatch.model.contract import (
    ContractViolation,
    count_keys,
    object_with_duplicates,
    raw_is_clean,
)


def decode(raw: bytes) -> tuple[Any, bool]:
    """The document and whether its values are known to meet the validation contract without
    being checked one by one (see :func:`~sparkwatch.model.contract.raw_is_clean`).

    orjson refuses NaN/Infinity literals and lone surrogates and silently keeps the last of
    duplicate keys: such bodies, and any that the cheap checks cannot clear, are read again by
    the standard library, whose result the contract then checks value by value.

    Raises ``ValueError`` (``json.JSONDecodeError`` or ``UnicodeDecodeError``) or
    ``RecursionError`` for what the standard library refuses too.
    """
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return decode_exact(raw), False
    try:
        # The document root and the events array sit above each event's own nesting.
        keys = count_keys(doc, depth=-1)
    except ContractViolation:
        return decode_exact(raw), False
    if raw_is_clean(raw, keys):
        return doc, True
    return decode_exact(raw), False


def decode_exact(raw: bytes) -> Any:
    return json.loads(raw, object_pairs_hook=object_with_duplicates)


def encode(value: Any) -> bytes:
    """Compact JSON of a value the contract accepted (orjson holds every such value)."""
    return orjson.dumps(value)
