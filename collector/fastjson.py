"""JSON on the collector's hot path: orjson (a C codec, several times faster on progress events)
and, for what orjson cannot vouch for, the standard library with duplicate keys kept visible."""

from __future__ import annotations

import json
from typing import Any

import orjson

from sparkwatch.model.contract import object_with_duplicates


def decode(raw: bytes) -> tuple[Any, bool]:
    """The document, and whether orjson read it (strict JSON: no NaN/Infinity literals, no lone
    surrogates; duplicate keys silently keep the last, which the canonical check then catches).
    What orjson refuses is read by the standard library, duplicate keys kept visible.

    Raises ``ValueError`` (``json.JSONDecodeError`` or ``UnicodeDecodeError``) or
    ``RecursionError`` for what the standard library refuses too.
    """
    try:
        return orjson.loads(raw), True
    except orjson.JSONDecodeError:
        return decode_exact(raw), False


def decode_exact(raw: bytes) -> Any:
    return json.loads(raw, object_pairs_hook=object_with_duplicates)


def encode(value: Any) -> bytes:
    """Compact JSON of a value the contract accepted (orjson holds every such value)."""
    return orjson.dumps(value)
