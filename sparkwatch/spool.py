"""A bounded, durable FIFO of JSON records on local disk: append, read in order, commit.

Used by the collector as its write-ahead spool (a request is appended, and with ``fsync`` on disk,
before it is answered) and by the listener's push sink as its overflow spool. Standard library
only: the listener imports it in the Spark driver.

Layout: ``<dir>/<seq>.wal`` segments of records ``[u32 length][u32 crc32][JSON bytes]`` and a
``cursor`` file holding the position of the first record not yet committed. Only the newest
segment can end with a torn record (a crash during an append that was therefore never
acknowledged); opening the spool cuts it off. A commit moves the cursor (atomically, by rename) and
deletes the segments entirely before it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

try:  # optional C decoder (the collector has it; a Spark driver may not): replays read faster
    import orjson as _fast_json
except ImportError:  # pragma: no cover - the standard library alone
    _fast_json = None  # type: ignore[assignment]


def _decode(data: bytes) -> Any:
    if _fast_json is not None:
        try:
            return _fast_json.loads(data)
        except _fast_json.JSONDecodeError:  # NaN/Infinity literals: the standard library reads
            pass
    return json.loads(data)

HEADER = struct.Struct(">II")
SUFFIX = ".wal"
DEFAULT_SEGMENT_BYTES = 8 << 20


class SpoolFull(Exception):
    """Appending would exceed the spool's bound; the message says by how much."""


class SpoolBusy(Exception):
    """Another process has the spool open (two writers would interleave and lose records)."""


@dataclass(frozen=True, order=True, slots=True)
class Position:
    segment: int
    offset: int


class Spool:
    """Thread-safe: many appenders, one reader (which alone calls :meth:`read`/:meth:`commit`)."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        fsync: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._fsync = fsync
        self._segment_bytes = segment_bytes
        self._lock = threading.Lock()
        self._appended = threading.Condition(self._lock)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lockfile = _lock(self.directory)
        self._cursor = self._load_cursor()
        self._end = self._recover()
        self._cursor = min(self._cursor, self._end)
        self._out = open(self._path(self._end.segment), "ab")  # noqa: SIM115 - held open
        self._bytes = self._measure()

    # --- writing ----------------------------------------------------------------------------

    def append(self, record: Any) -> tuple[Position, Position]:
        """Append one JSON-serialisable record; durable on return (with ``fsync``).

        Returns where the record starts and ends. Raises :class:`SpoolFull` when the pending bytes
        would exceed ``max_bytes``.
        """
        return self.append_encoded(json.dumps(record, separators=(",", ":")).encode())

    def append_encoded(self, data: bytes) -> tuple[Position, Position]:
        """:meth:`append` for a record already encoded as JSON (by a faster encoder)."""
        frame = HEADER.pack(len(data), zlib.crc32(data)) + data
        with self._lock:
            if self._bytes + len(frame) > self.max_bytes:
                raise SpoolFull(
                    f"spool {self.directory} holds {self._bytes} bytes; {len(frame)} more would "
                    f"exceed its bound of {self.max_bytes} bytes"
                )
            if self._end.offset and self._end.offset + len(frame) > self._segment_bytes:
                self._rotate()
            start = self._end
            self._out.write(frame)
            self._out.flush()
            if self._fsync:
                os.fsync(self._out.fileno())
            self._end = Position(self._end.segment, self._end.offset + len(frame))
            self._bytes += len(frame)
            self._appended.notify_all()
            return start, self._end

    def _rotate(self) -> None:
        self._out.close()
        self._end = Position(self._end.segment + 1, 0)
        self._out = open(self._path(self._end.segment), "ab")  # noqa: SIM115
        self._sync_dir()

    # --- reading ----------------------------------------------------------------------------

    def wait(self, timeout: float) -> bool:
        """Wait until something is pending; False on timeout."""
        with self._lock:
            return self._appended.wait_for(lambda: self._cursor < self._end, timeout)

    def read(self, max_items: int) -> tuple[list[Any], Position]:
        """Pending records from the cursor, whole, until their items reach ``max_items`` (a list
        record counts its length); returns them and the position after the last one."""
        return read_span(self.directory, self._cursor, self.end, max_items)

    def pending(self) -> Iterator[Any]:
        """Every pending record, in order (without committing): e.g. to rebuild state on start."""
        for record, _ in _scan(self.directory, self._cursor, self.end):
            if record is not None:
                yield record

    def commit(self, position: Position) -> None:
        """Records before ``position`` are done: move the cursor, drop finished segments."""
        with self._lock:
            self._write_cursor(position)
            self._cursor = position
            for path in self._segments():
                if _seq(path) < position.segment:
                    path.unlink()
            self._bytes = self._measure()

    # --- state ------------------------------------------------------------------------------

    @property
    def cursor(self) -> Position:
        """The first record not yet committed."""
        with self._lock:
            return self._cursor

    @property
    def end(self) -> Position:
        """The position after the last record appended."""
        with self._lock:
            return self._end

    @property
    def pending_bytes(self) -> int:
        return self._bytes

    def is_empty(self) -> bool:
        with self._lock:
            return not self._cursor < self._end

    def close(self) -> None:
        with self._lock:
            self._out.close()
            self._lockfile.close()  # releases the flock

    # --- internals --------------------------------------------------------------------------

    def _path(self, segment: int) -> Path:
        return _segment_path(self.directory, segment)

    def _segments(self) -> list[Path]:
        return sorted(self.directory.glob("*" + SUFFIX), key=_seq)

    def _load_cursor(self) -> Position:
        path = self.directory / "cursor"
        if path.exists():
            segment, offset = path.read_text().split()
            return Position(int(segment), int(offset))
        segments = self._segments()
        return Position(_seq(segments[0]) if segments else 0, 0)

    def _write_cursor(self, position: Position) -> None:
        tmp = self.directory / "cursor.tmp"
        with open(tmp, "w") as f:
            f.write(f"{position.segment} {position.offset}\n")
            f.flush()
            if self._fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.directory / "cursor")
        self._sync_dir()

    def _sync_dir(self) -> None:
        if not self._fsync:
            return
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _recover(self) -> Position:
        """The end of the valid data, cutting off a torn record at the end of the last segment."""
        segments = self._segments()
        if not segments:
            return Position(self._cursor.segment, 0)
        last = segments[-1]
        valid = 0
        with open(last, "rb") as f:
            for _, after in _frames(f, 0, None, last, strict=False):
                valid = after
        if valid < last.stat().st_size:
            log.warning("spool %s: cutting a torn record off %s at byte %d (never acknowledged)",
                        self.directory, last.name, valid)
            with open(last, "r+b") as f:
                f.truncate(valid)
        return Position(_seq(last), valid)

    def _measure(self) -> int:
        total = 0
        for path in self._segments():
            if _seq(path) >= self._cursor.segment:
                total += path.stat().st_size
        return max(0, total - self._cursor.offset)


def read_span(
    directory: Path, start: Position, end: Position, max_items: int
) -> tuple[list[Any], Position]:
    """Records of the spool in ``directory`` from ``start`` (before ``end``), whole, until their
    items reach ``max_items`` (a list record counts its length), and the position after the last.

    Takes no lock: safe beside the appending process (which writes only past ``end``) as long as
    nothing commits past ``start`` meanwhile, e.g. from the spool's reader or a process it runs.
    """
    records: list[Any] = []
    items = 0
    position = start
    for record, after in _scan(directory, start, end):
        position = after
        if record is None:
            continue
        records.append(record)
        items += len(record) if isinstance(record, list) else 1
        if items >= max_items:
            break
    return records, position


def _segment_path(directory: Path, segment: int) -> Path:
    return directory / f"{segment:012d}{SUFFIX}"


def _scan(directory: Path, start: Position, end: Position) -> Iterator[tuple[Any, Position]]:
    """Records in [start, end), each with the position after it."""
    segment, offset = start.segment, start.offset
    while Position(segment, offset) < end:
        path = _segment_path(directory, segment)
        limit = end.offset if segment == end.segment else None
        if path.exists():
            with open(path, "rb") as f:
                f.seek(offset)
                for record, after in _frames(f, offset, limit, path):
                    offset = after
                    yield record, Position(segment, after)
            if segment < end.segment and offset < path.stat().st_size:
                # Corrupt in the middle (disk trouble): skip to the next segment; the None
                # record moves the reader's position past what was lost.
                yield None, Position(segment + 1, 0)
        elif segment < end.segment:
            yield None, Position(segment + 1, 0)
        segment, offset = segment + 1, 0


def _lock(directory: Path) -> Any:
    """An exclusive lock on the directory, released when the process dies (even by SIGKILL)."""
    f = open(directory / "lock", "a")  # noqa: SIM115 - held until close()
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        f.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise SpoolBusy(f"spool {directory} is in use by another process") from None
        raise
    return f


def _seq(path: Path) -> int:
    return int(path.name.removesuffix(SUFFIX))


def _frames(
    f: Any, offset: int, limit: int | None, path: Path, strict: bool = True
) -> Iterator[tuple[Any, int]]:
    """Decode frames from ``f`` at ``offset`` up to ``limit``; yields (record, offset after)."""
    while limit is None or offset < limit:
        header = f.read(HEADER.size)
        if len(header) < HEADER.size:
            return
        length, crc = HEADER.unpack(header)
        data = f.read(length)
        if len(data) < length or zlib.crc32(data) != crc:
            if strict:
                log.error("spool %s: corrupt record at byte %d, skipping the segment's rest",
                          path, offset)
            return
        offset += HEADER.size + length
        yield _decode(data), offset
