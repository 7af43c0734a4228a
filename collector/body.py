"""Decoding an ingest request body: size limits (before and after gzip), JSON, its shape.

Every failure is a :class:`BodyError` with the HTTP status to answer and a message naming what
was wrong with the request.
"""

from __future__ import annotations

import zlib
from typing import Any

from sparkwatch.collector.fastjson import decode, decode_exact

GZIP_TRAILER = 4
IN_CHUNK = 64 << 10
OUT_CHUNK = 1 << 20


class BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def too_large(limit: int, what: str = "request body") -> BodyError:
    return BodyError(413, f"{what} is larger than the limit of {limit} bytes (max_body_bytes)")


def inflated_size(body: bytes | bytearray, encoding: str | None, limit: int) -> int:
    """The bytes ``body`` takes with its decompressed form: what decoding it holds at once. A
    gzip body says its size in its trailer (:func:`decompress` holds it to that)."""
    if _encoding(encoding) != "gzip" or len(body) < GZIP_TRAILER:
        return len(body)
    return len(body) + min(limit, _trailer_size(body))


def decompress(body: bytes | bytearray, encoding: str | None, limit: int) -> bytes | bytearray:
    """``body`` as sent with Content-Encoding ``encoding`` (identity or gzip), at most ``limit``
    bytes once decompressed (a small gzip body can expand a thousandfold), and no more than its
    gzip trailer says (the size the request's memory was reserved for)."""
    encoding = _encoding(encoding)
    if encoding == "identity":
        return body
    if encoding != "gzip":
        raise BodyError(415, f"unsupported Content-Encoding {encoding!r}: send gzip or identity")
    declared = _trailer_size(body) if len(body) >= GZIP_TRAILER else limit
    cap = min(limit, declared)
    out, inflater = _Inflated(cap), zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    view, after = memoryview(body), 0
    try:
        for start in range(0, len(view), IN_CHUNK):
            data: memoryview | bytes = view[start:start + IN_CHUNK]
            if inflater.eof:
                after += len(data)
                continue
            # Bounded pieces into one buffer: a thousandfold bomb never inflates past `cap`, and
            # the result is not joined from blocks at the end (which would hold it twice).
            while data and not inflater.eof:
                if not out.add(inflater.decompress(data, OUT_CHUNK)):
                    if cap == limit:
                        raise too_large(limit, "decompressed request body")
                    # The last four bytes are the trailer only when nothing follows the stream:
                    # zeros after it read as "0 bytes", which was all the message said.
                    raise BodyError(400, "Content-Encoding is gzip but the body inflates past "
                                    f"the size its last four bytes declare ({declared} bytes): "
                                    "a gzip trailer that is wrong, or bytes after the gzip "
                                    "stream; send the body as one gzip member")
                data = inflater.unconsumed_tail
    except zlib.error as exc:
        raise BodyError(400, f"Content-Encoding is gzip but the body is not valid gzip: {exc}") \
            from None
    if not inflater.eof:
        raise BodyError(400, "Content-Encoding is gzip but the body is truncated gzip")
    after += len(inflater.unused_data)
    if after:
        # Not read silently: a second gzip member (its events) or bytes a proxy added; and the
        # trailer the memory was reserved by is the body's last four bytes.
        raise BodyError(400, f"Content-Encoding is gzip but {after} bytes follow the gzip "
                        "stream: send the body as one gzip member")
    return out.value()


class _Inflated:
    """A buffer of at most ``cap`` bytes, allocated once."""

    def __init__(self, cap: int) -> None:
        self._buffer, self._filled, self._cap = bytearray(), 0, cap

    def add(self, piece: bytes) -> bool:
        """False when ``piece`` would pass the cap."""
        end = self._filled + len(piece)
        if end > self._cap:
            return False
        if not self._buffer:
            self._buffer = bytearray(self._cap)
        self._buffer[self._filled:end] = piece
        self._filled = end
        return True

    def value(self) -> bytearray:
        del self._buffer[self._filled:]
        return self._buffer


def _encoding(encoding: str | None) -> str:
    return (encoding or "identity").strip().lower()


def _trailer_size(body: bytes | bytearray) -> int:
    """ISIZE, the last four bytes of a gzip member: its uncompressed size modulo 2**32."""
    return int.from_bytes(body[-GZIP_TRAILER:], "little")


def events_of(raw: bytes | bytearray, max_events: int) -> tuple[list[Any], bool]:
    """The ``events`` array of a JSON body ``{"events": [...]}`` and whether orjson read it
    strictly (see :func:`.fastjson.decode`); items are checked one by one later, so that one bad
    event does not cost the others."""
    try:
        doc, strict = decode(raw)
    except ValueError as exc:
        # JSONDecodeError and UnicodeDecodeError, and the standard library's refusal of an
        # integer literal over 4,300 digits (a ValueError of its own).
        raise BodyError(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BodyError(400, "request body is JSON nested too deeply") from None
    return _events(doc, max_events), strict


def exact_events(raw: bytes | bytearray) -> list[Any] | None:
    """The events of a body :func:`events_of` read strictly, read again with duplicate keys
    kept visible (for the contract's value-by-value check); None when it nests deeper than the
    standard library reads (orjson reads 1,024 levels): the contract then refuses the deep event
    on its own, from orjson's reading."""
    try:
        doc = decode_exact(raw)
    except ValueError as exc:  # pragma: no cover - orjson read it
        raise BodyError(400, f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        return None
    return _events(doc, None)


def _events(doc: Any, max_events: int | None) -> list[Any]:
    if getattr(doc, "duplicates", None):
        raise BodyError(400, f"request body names the key {doc.duplicates[0]!r} twice")
    if not isinstance(doc, dict) or "events" not in doc:
        raise BodyError(400, 'request body must be a JSON object {"events": [...]}')
    events = doc["events"]
    if not isinstance(events, list):
        raise BodyError(400, f'"events" must be a JSON array, got {type(events).__name__}')
    if max_events is not None and len(events) > max_events:
        raise BodyError(
            413, f"{len(events)} events in one request, over the limit of {max_events} "
            "(max_events_per_request): send smaller batches"
        )
    return events
