"""A bounded, durable FIFO of JSON records on local disk: append, read in order, commit.

Used by the collector as its write-ahead spool (a request is appended, and with ``fsync`` on disk,
before it is answered) and by the listener's push sink as its overflow spool. Standard library
only: the listener imports it in the Spark driver.

Layout: ``<dir>/<seq>.wal`` segments of records ``[u32 length][u32 crc32][JSON bytes]`` and a
``cursor`` file holding the position of the first record not yet committed. Only the newest
segment can end with a torn record (a crash during an append that was therefore never
acknowledged); opening the spool cuts it off. A commit moves the cursor (atomically, by rename) and
deletes the segments entirely before it.

A failed write (ENOSPC, EIO, any ``OSError`` on write, fsync or rotation) raises
:class:`SpoolWriteFailed` after cutting the segment back to the end of the last good record, so
that the next append follows valid data: a torn frame left in the middle of a segment would make
the reader skip the acknowledged records after it. When even the cut fails, the spool repairs
itself before its next append, and refuses appends until it can.

Owners: an appender may name the owner of what it appends (the collector: the request's tenant)
and the share of the bound that owner may hold; the spool then counts each owner's pending bytes,
gives them back as commits pass its records, and counts them again from the records themselves
(``owner_of``) when it is opened. The count is per run of one owner's records in one segment,
whose bytes are contiguous: a commit inside a run is exact, and appends of one owner in a row cost
no new entry.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import struct
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparkwatch.jsoncodec import loads

log = logging.getLogger(__name__)

HEADER = struct.Struct(">II")
SUFFIX = ".wal"
DEFAULT_SEGMENT_BYTES = 8 << 20


class SpoolUnavailable(Exception):
    """The record was not appended (nothing of it is in the spool); try again later. The message
    names the spool's directory: for its operator's log, not for a client."""


class SpoolFull(SpoolUnavailable):
    """Appending would exceed the spool's bound; the message says by how much."""

    def __init__(self, message: str, more: int, bound: int, owned: int | None) -> None:
        super().__init__(message)
        self.more = more
        """the bytes the refused append needed"""
        self.bound = bound
        """the bound it would have exceeded"""
        self.owned = owned
        """the pending bytes of the append's owner (None: it named none)"""


class ShareFull(SpoolFull):
    """Appending would exceed its owner's share of the bound (``bound`` is the share)."""


class SpoolWriteFailed(SpoolUnavailable):
    """The disk refused the write (full, I/O error); the message names the spool and the error,
    ``reason`` the error alone."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class SpoolBusy(Exception):
    """Another process has the spool open (two writers would interleave and lose records)."""


@dataclass(frozen=True, order=True, slots=True)
class Position:
    segment: int
    offset: int


@dataclass(slots=True)
class _Run:
    """Pending bytes [start, end) of one segment, all of one owner's records."""

    segment: int
    start: int
    end: int
    owner: str


class Spool:
    """Thread-safe: many appenders, one reader (which alone calls :meth:`read`/:meth:`commit`)."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        fsync: bool = True,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        owner_of: Callable[[bytes], str] | None = None,
    ) -> None:
        """``owner_of``: the owner of a record, from its encoded bytes, to count the pending
        records' owners when the spool is opened (see :meth:`owned`)."""
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
        self._out: Any = None  # the newest segment, opened for appending; None when broken
        self._reopen()
        self._bytes = self._measure()
        self._owned: dict[str, int] = {}
        self._runs: deque[_Run] = deque()
        if owner_of is not None:
            self._count_owners(owner_of)
        self.write_failures = 0
        """Appends and cursor writes the disk refused, since this spool was opened."""
        self.append_error: str | None = None
        """Why the last append the disk refused failed (None once one succeeds again): while
        set, every append is likely refused (the disk is full), whatever the byte bound says."""
        self.append_reason: str | None = None
        """:attr:`append_error` without the spool's directory (the OS's words, e.g. "No space
        left on device"), for an answer served without a token."""

    # --- writing ----------------------------------------------------------------------------

    def append(self, record: Any) -> tuple[Position, Position]:
        """Append one JSON-serialisable record; durable on return (with ``fsync``).

        Returns where the record starts and ends. Raises :class:`SpoolFull` when the pending bytes
        would exceed ``max_bytes``.
        """
        return self.append_encoded(json.dumps(record, separators=(",", ":")).encode())

    def append_encoded(self, data: bytes) -> tuple[Position, Position]:
        """:meth:`append` for a record already encoded as JSON (by a faster encoder).

        Raises :class:`SpoolFull` (over the bound) or :class:`SpoolWriteFailed` (the disk
        refused it); either way nothing of the record stays in the spool.
        """
        return self.append_all([data])

    def append_all(self, records: Iterable[bytes], owner: str | None = None,
                   share: int | None = None) -> tuple[Position, Position]:
        """Append encoded records as one: all of them (durable on return, one fsync) or, on any
        error (also one raised by ``records``, which may encode each when it is asked for it),
        none. Returns where the first starts and the last ends.

        One request's events in several records keep the reader's memory bounded (it reads
        whole records); written as they come, they are not all encoded at once either.

        ``owner``: whose records these are (counted in :meth:`owned` until committed);
        ``share``: the most pending bytes ``owner`` may hold, past which :class:`ShareFull` is
        raised (None: only the spool's bound applies).
        """
        with self._lock:
            if self._out is None:  # a failed append could not cut its frames off: do it now
                self._repair()
            start: Position | None = None
            added = 0
            owned = None if owner is None else self._owned.get(owner, 0)
            try:
                for data in records:
                    header = HEADER.pack(len(data), zlib.crc32(data))
                    size = len(header) + len(data)
                    more = added + size
                    self._check_room(more, owner, owned, share)
                    if start is None:
                        self._rotate_for(size)
                        start = self._end
                    _write_all(self._out.fileno(), header)
                    _write_all(self._out.fileno(), data)
                    added += size
                if start is None:
                    return self._end, self._end
                if self._fsync:
                    os.fsync(self._out.fileno())
            except OSError as exc:
                self._failed_append()
                raise self._refused(exc) from None
            except BaseException:
                if start is not None:  # e.g. the encoding failed, or over the bound
                    self._failed_append(counted=False)
                raise
            self.append_error = self.append_reason = None
            self._end = Position(start.segment, start.offset + added)
            self._bytes += added
            if owner is not None:
                self._own(owner, start, added)
            self._appended.notify_all()
            return start, self._end

    def _check_room(self, more: int, owner: str | None, owned: int | None,
                    share: int | None) -> None:
        """Raise :class:`ShareFull` or :class:`SpoolFull` when ``more`` bytes do not fit. A
        share of the whole bound is the bound: a full spool is then said to be full."""
        if (owned is not None and share is not None and share < self.max_bytes
                and owned + more > share):
            raise ShareFull(
                f"{owner!r}'s share of spool {self.directory} is full: it holds {owned} bytes; "
                f"{more} more would exceed its share of {share} bytes", more, share, owned)
        if self._bytes + more > self.max_bytes:
            raise SpoolFull(
                f"spool {self.directory} holds {self._bytes} bytes; {more} more would exceed "
                f"its bound of {self.max_bytes} bytes", more, self.max_bytes, owned)

    def _own(self, owner: str, start: Position, size: int) -> None:
        """Count ``size`` bytes from ``start`` (one segment) as ``owner``'s."""
        self._owned[owner] = self._owned.get(owner, 0) + size
        last = self._runs[-1] if self._runs else None
        if (last is not None and last.owner == owner and last.segment == start.segment
                and last.end == start.offset):
            last.end += size
        else:
            self._runs.append(_Run(start.segment, start.offset, start.offset + size, owner))

    def _disown(self, position: Position) -> None:
        """Give back the owners' bytes before ``position`` (committed)."""
        runs = self._runs
        while runs and runs[0].segment <= position.segment:
            run = runs[0]
            if run.segment == position.segment and run.end > position.offset:
                if run.start < position.offset:  # a commit inside the run: bytes are offsets
                    self._give(run.owner, position.offset - run.start)
                    run.start = position.offset
                return
            self._give(run.owner, run.end - run.start)
            runs.popleft()

    def _give(self, owner: str, size: int) -> None:
        left = self._owned[owner] - size
        if left > 0:
            self._owned[owner] = left
        else:  # gone: the map holds only owners with pending records
            del self._owned[owner]

    def _count_owners(self, owner_of: Callable[[bytes], str]) -> None:
        """Count the pending records' owners, read from the records (on open)."""
        position = self._cursor
        for owner, after in _scan(self.directory, self._cursor, self._end, owner_of):
            if owner is not None and after.segment == position.segment:
                self._own(owner, position, after.offset - position.offset)
            position = after

    def _repair(self) -> None:
        try:
            self._reopen()
        except OSError as exc:
            self.write_failures += 1
            raise self._refused(exc) from None

    def _refused(self, exc: OSError) -> SpoolWriteFailed:
        self.append_reason = exc.strerror or type(exc).__name__
        self.append_error = f"spool {self.directory} cannot write: {exc.strerror or exc}"
        return SpoolWriteFailed(self.append_error, self.append_reason)

    def _rotate_for(self, size: int) -> None:
        if self._end.offset and self._end.offset + size > self._segment_bytes:
            self._rotate()

    def _failed_append(self, counted: bool = True) -> None:
        """Cut the newest segment back to the last good record; on failure close it, and the
        next append cuts it first (:meth:`_reopen`)."""
        self.write_failures += counted
        try:
            os.ftruncate(self._out.fileno(), self._end.offset)
        except OSError as exc:
            log.error("spool %s: cannot cut a failed append off %s (%s); appends are refused "
                      "until it can", self.directory, self._path(self._end.segment).name, exc)
            with contextlib.suppress(OSError):
                self._out.close()
            self._out = None

    def _reopen(self) -> None:
        """Open the newest segment for appending, cut to the end of its last good record."""
        out = open(self._path(self._end.segment), "ab", buffering=0)  # noqa: SIM115 - held
        try:
            if os.fstat(out.fileno()).st_size > self._end.offset:
                os.ftruncate(out.fileno(), self._end.offset)
        except OSError:
            out.close()
            raise
        self._out = out

    def _rotate(self) -> None:
        """Start the next segment; the current one stays open until the new one exists."""
        following = self._end.segment + 1
        path = self._path(following)
        out = open(path, "ab", buffering=0)  # noqa: SIM115 - held open
        try:
            self._sync_dir()
        except OSError:
            out.close()
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        self._out.close()
        self._out = out
        self._end = Position(following, 0)

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
        """Records before ``position`` are done: move the cursor, drop finished segments.

        Never raises for a disk error: when the cursor file cannot be written (the disk is full)
        the cursor moves in memory only, and the finished segments are deleted all the same
        (which frees the room); after a crash before the next successful commit the records
        since the cursor on disk are replayed, which the history absorbs.
        """
        with self._lock:
            try:
                self._write_cursor(position)
            except OSError as exc:
                self.write_failures += 1
                log.warning("spool %s: cannot write the cursor (%s); records since the last one "
                            "written would be replayed after a crash", self.directory,
                            exc.strerror or exc)
            self._cursor = position
            self._disown(position)
            for path in self._segments():
                if _seq(path) < position.segment:
                    with contextlib.suppress(FileNotFoundError):
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

    def owned(self, owner: str) -> int:
        """The pending bytes of ``owner``'s records (0 for an owner with none)."""
        with self._lock:
            return self._owned.get(owner, 0)

    def owners(self) -> dict[str, int]:
        """The pending bytes of every owner with pending records."""
        with self._lock:
            return dict(self._owned)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._cursor < self._end

    def close(self) -> None:
        with self._lock:
            if self._out is not None:
                self._out.close()
            self._lockfile.close()  # releases the flock

    # --- internals --------------------------------------------------------------------------

    def _path(self, segment: int) -> Path:
        return _segment_path(self.directory, segment)

    def _segments(self) -> list[Path]:
        return sorted(self.directory.glob("*" + SUFFIX), key=_seq)

    def _load_cursor(self) -> Position:
        path = self.directory / "cursor"
        segments = self._segments()
        first = Position(_seq(segments[0]) if segments else 0, 0)
        if path.exists():
            segment, offset = path.read_text().split()
            # Behind the oldest segment: its segments were deleted by a commit whose cursor
            # could not be written (disk full); the oldest one left starts what is pending.
            return max(Position(int(segment), int(offset)), first)
        return first

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
    directory: Path, start: Position, end: Position, max_items: int,
    decode: Callable[[bytes], Any] = loads,
) -> tuple[list[Any], Position]:
    """Records of the spool in ``directory`` from ``start`` (before ``end``), whole, until their
    items reach ``max_items`` (a list record counts its length), and the position after the last.

    ``decode`` turns a record's JSON bytes into the record (the history writer reads them typed).
    Takes no lock: safe beside the appending process (which writes only past ``end``) as long as
    nothing commits past ``start`` meanwhile, e.g. from the spool's reader or a process it runs.
    """
    records: list[Any] = []
    items = 0
    position = start
    for record, after in _scan(directory, start, end, decode):
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


def _scan(directory: Path, start: Position, end: Position,
          decode: Callable[[bytes], Any] = loads) -> Iterator[tuple[Any, Position]]:
    """Records in [start, end), each with the position after it."""
    segment, offset = start.segment, start.offset
    while Position(segment, offset) < end:
        path = _segment_path(directory, segment)
        limit = end.offset if segment == end.segment else None
        if path.exists():
            with open(path, "rb") as f:
                f.seek(offset)
                for record, after in _frames(f, offset, limit, path, decode=decode):
                    offset = after
                    yield record, Position(segment, after)
        if segment < end.segment:
            # Past a finished segment the reader's position moves on to the next one (the None
            # record): also when a rotation started that one and its first record never came (a
            # crash, a refused write), the end being its start. Records left in it (corrupt in
            # the middle: disk trouble) or a segment missing are skipped.
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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _seq(path: Path) -> int:
    return int(path.name.removesuffix(SUFFIX))


def _frames(
    f: Any, offset: int, limit: int | None, path: Path, strict: bool = True,
    decode: Callable[[bytes], Any] = loads,
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
        record = decode(data)
        del data  # not held while the caller works on the record (it may be a large request)
        yield record, offset
