"""Events the history cannot store, set aside so that they never stop the others.

The validation contract refuses at the door what could not be stored; this is defence in depth
behind it (a database constraint, a bug, a record spooled by an older collector). When a span of
the spool fails to write for a reason of its data, the history writer writes its events one by
one; each that still fails is appended here, with the database's reason, before the spool moves
past it. A connection or server failure is never a reason to quarantine: those spans are retried.

The quarantine is a JSON-lines file beside the spool (``quarantine.jsonl``), not a table: the
database may be what refuses the record. Appends are fsynced under an exclusive lock, entries are
keyed by a digest of the event (a replayed span does not add them twice), and ``sparkwatch
quarantine`` lists, replays (writes to the history, removing what was written) or drops
them.

A drop rewrites the file (to a temporary, renamed over it). A replay removes what it wrote in
place instead, one byte an entry (:data:`MARK` over the ``{`` that opens its line), and rewrites
the file only once the lines it removed hold half of it, and when it ends (:class:`Replaying`):
replaying a full quarantine reads and writes it a bounded number of times, where a rewrite per
batch of entries read and wrote it once per hundred entries. Every rewrite leaves removed lines
out; one of a replay's that fails (the spool not writable) fails nothing: its removals stand,
and the next rewrite makes it (:attr:`Replaying.compact_error`). A file that cannot be written in
place (another user's, mounted read-only) is removed from by a rewrite; when that fails too, what
the replay wrote stays here, and the next replay writes it again, which the history keeps once
(:attr:`Replaying.unremoved`).

A line whose object names a key twice (only a hand or another tool writes one) is no entry:
which id, event or tenant it means cannot be told (:func:`_object`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from sparkwatch.model.tenant import DEFAULT_TENANT

FILE = "quarantine.jsonl"
DEFAULT_MAX_BYTES = 256 << 20
MARK = b" "
"""What a replay writes over the ``{`` that opens an entry's line once the history holds the
entry: the line is then no entry (not JSON), listed by no one and left out of the next rewrite.
One byte, which a crash writes whole or not at all: a line is an entry or removed, never torn by
its removal."""
COMPACT_SHARE = 2
"""A replay rewrites the file (leaving out what it removed in place) once the lines it removed
hold 1/COMPACT_SHARE of the file: each rewrite then writes at most half of what the one before
wrote, so all of them together write the file at most once and read it (two passes each) at most
four times, however many entries it holds."""
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)
"""Why a file cannot be opened to be written in place, where a rewrite beside it may be made."""
_BLANKS = (b" ", b"\t", b"\r")
"""The whitespace JSON allows before a value (a line holds no newline)."""


class QuarantineFull(OSError):
    """Adding would take the quarantine past its bound: the events stay in the spool (the span
    is retried, so nothing is lost silently; the spool fills and ingest answers 503)."""


class QuarantineUnwritable(OSError):
    """The disk refused the quarantine file (full, I/O error); the message names the file. Nothing
    of the append stays: the span is retried, its events stay in the spool."""


RETRIES = 3
"""Failed attempts of one span, for a reason that is neither the connection nor the data, before
its events are written one by one (and the failing ones quarantined)."""


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    at: float | None
    """when it was quarantined (epoch seconds); None for a line whose time is no time (a file
    edited by hand or by another tool): listed, replayed and dropped all the same"""
    reason: str
    event: Any
    """the wire envelope (or, for a record that could not even be read, the raw item)"""
    tenant: str = DEFAULT_TENANT
    """the tenant of the token that pushed it (replayed into that tenant's history)"""


LAST_TIME = 253402300799.0
"""9999-12-31T23:59:59Z, the last second a datetime shows."""


def _time(value: Any) -> float | None:
    if type(value) in (int, float) and 0 <= value <= LAST_TIME:  # NaN fails both comparisons
        return float(value)
    return None


def entry_id(event: Any) -> str:
    raw = json.dumps(event, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Quarantine:
    def __init__(self, spool_dir: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.path = Path(spool_dir) / FILE
        self.max_bytes = max_bytes

    def add(self, items: Sequence[tuple[Any, str]], tenants: Sequence[str] | None = None) -> int:
        """Append (event, reason) pairs not already here (``tenants``: the tenant of each, by
        default ``default``); durable on return. Returns how many were new. An event given twice
        is added once, with the first reason and tenant given, as it would be if it were here."""
        if not items:
            return 0
        owners = list(tenants) if tenants is not None else [DEFAULT_TENANT] * len(items)
        ids = [entry_id(event) for event, _ in items]
        with self._locked():
            known, removed = self._holds(set(ids))
            fresh = []
            for i, (event, reason), tenant in zip(ids, items, owners, strict=True):
                if i not in known:
                    known.add(i)
                    fresh.append((i, event, reason, tenant))
            lines = [json.dumps({"id": i, "at": time.time(), "reason": r, "event": e,
                                 **({"tenant": t} if t != DEFAULT_TENANT else {})},
                                ensure_ascii=True, default=str) + "\n" for i, e, r, t in fresh]
            held = self._size()
            adding = sum(map(len, lines))
            if held + adding > self.max_bytes and removed:
                # Lines a replay removed in place keep their room until a rewrite: it is made
                # now (once), rather than refuse what they make room for.
                with contextlib.suppress(OSError):  # then refused as full, as it was
                    self._rewrite_locked(set(), compact=True)
                held = self._size()
            if held + adding > self.max_bytes:
                raise QuarantineFull(
                    f"quarantine {self.path} holds {held} bytes; {adding} more would exceed its "
                    f"bound of {self.max_bytes} (quarantine_max_bytes): replay or drop entries")
            try:
                self._append(lines, held)
            except OSError as exc:
                raise QuarantineUnwritable(
                    f"quarantine {self.path} cannot write: {exc.strerror or exc}") from None
            return len(fresh)

    def _size(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def _holds(self, ids: set[str]) -> tuple[set[str], bool]:
        """Which of ``ids`` the file holds as entries, and whether it may have lines a replay
        removed in place. A line at a time, and only the lines that may be one of ``ids``
        parsed: a line as :meth:`add` writes it has its id in its first bytes (an append read
        every line of a full quarantine as JSON, under the lock, for the few ids it adds)."""
        try:
            fd = _open_regular(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return set(), False
        known: set[str] = set()
        removed = False
        with os.fdopen(fd, "rb") as f:
            for raw in f:
                brace = _brace(raw)
                if raw[brace:brace + 1] != b"{":  # no JSON object: no entry
                    removed = removed or (brace > 0 and raw[brace:brace + 1] == b'"')
                    continue
                quick = _quick_id(raw)
                if quick is not None and quick not in ids:
                    # (A line naming "id" twice, its first not one of ids, is no entry either:
                    # see _object.)
                    continue
                entry = _entry(raw)
                if entry is not None and entry.id in ids:
                    known.add(entry.id)
        return known, removed

    def _append(self, lines: list[str], held: int) -> None:
        fd = _open_regular(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        with os.fdopen(fd, "a", encoding="ascii") as f:
            try:
                # Its last byte read from the descriptor checked to be a regular file, not by
                # the path again (a FIFO put there meanwhile blocked the append, lock held).
                if held and os.pread(fd, 1, held - 1) != b"\n":
                    # A line torn by a crash mid-append has no newline: end it, or the first
                    # line appended now would join it and be lost with it.
                    f.write("\n")
                f.writelines(lines)
                f.flush()
                os.fsync(f.fileno())
            except OSError:
                # Cut what did fit: entries kept from a refused append would count as added
                # before they were quarantined (the retry skips known ids).
                with contextlib.suppress(OSError):
                    os.ftruncate(f.fileno(), held)
                raise

    def entries(self) -> list[Entry]:
        return self.scan()[0]

    def scan(self) -> tuple[list[Entry], int]:
        """The entries, and how many lines are no entry (torn by a crash, edited by hand): a
        listing says so rather than show fewer entries without a word. Blank lines, and the
        lines of entries a replay removed in place, are not counted.

        Without the lock: a rewrite is renamed over the file, so this reads the file before it
        or the one after it, whole; an entry a replay removes in place meanwhile (one byte) is
        read as held or as removed; the last line of an append being written may be read
        torn."""
        if not self.path.exists():
            return [], 0
        out = []
        unreadable = 0
        # Lines as remove_locked() splits them (at b"\n" only, not at the CR, FF or \x1c that
        # splitlines() also takes) and an id as it reads one: an entry listed is one a drop or
        # a replay can remove. Read a line at a time, not the whole file at once.
        with os.fdopen(_open_regular(self.path, os.O_RDONLY), "rb") as f:
            for raw in f:
                entry = _entry(raw)
                if entry is None:
                    unreadable += bool(raw.strip()) and not _removed(raw)
                else:
                    out.append(entry)
        return out, unreadable

    def twice(self) -> list[tuple[int, str]]:
        """The lines (numbered from 1) whose object names a key twice, with the key: no entries
        (:func:`_object`), named for whoever must edit them. Read again, only to say so."""
        if not self.path.exists():
            return []
        out = []
        with os.fdopen(_open_regular(self.path, os.O_RDONLY), "rb") as f:
            for n, raw in enumerate(f, 1):
                try:
                    _object(raw.decode("ascii", errors="replace"))
                except _Twice as twice:
                    out.append((n, twice.key))
                except (ValueError, RecursionError):
                    continue
        return out

    def remove(self, ids: set[str]) -> int:
        """Drop the entries with these ids (rewritten atomically); how many were removed. Every
        other line is kept byte for byte (its tenant and any field this version does not know),
        and nothing is written when nothing matches. The directory must exist: removing never
        creates a spool."""
        with self._locked(create=False):
            return len(self.remove_locked(ids))

    @contextmanager
    def locked(self) -> Iterator[set[str]]:
        """Hold the quarantine's lock (appends and rewrites wait for it), yielding the ids held
        now: what is decided inside it (a replay writing an entry, a drop) cannot be undone by
        another process before it is done. Never creates a spool directory."""
        with self._locked(create=False):
            yield {e.id for e in self.entries()}

    def remove_locked(self, ids: set[str]) -> list[str]:
        """:meth:`remove`, inside :meth:`locked` (the lock is not taken again: a second flock
        of this process would wait for itself); the id of each line removed. The lines of
        entries a replay removed in place go with them."""
        return self._rewrite_locked(ids, compact=False)[0]

    def replaying(self) -> Replaying:
        """The quarantine as a replay reads it, batch by batch (:class:`Replaying`, to close):
        the file is read once now, without the lock."""
        return Replaying(self)

    def _rewrite_locked(self, ids: set[str], *, compact: bool
                        ) -> tuple[list[str], dict[str, list[_Line]] | None]:
        """Rewrite the file without the lines of ``ids`` and those removed in place: the id of
        each line removed by id, and where each entry is in the file written. Nothing is
        written (None) when no line has one of ``ids`` and, unless ``compact``, whatever else
        the file holds."""
        try:
            fd = _open_regular(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return [], None
        with os.fdopen(fd, "rb") as f:
            plan = _plan(f, ids, whole=True)
            if not (plan.removed or (compact and plan.leave)):
                return [], None
            self._write_locked(f, plan)
        return plan.removed, plan.index

    def _write_locked(self, f: BinaryIO, plan: _Plan) -> None:
        """Write the file ``f`` (the one at the path) as ``plan`` says to a temporary, and
        rename it over the file: the lines planned that are not left out, then whatever follows
        them (appended since the plan was made), byte for byte."""
        # A symlinked quarantine is rewritten where the link points: replacing the link with a
        # file would leave the dropped entries in the target, which the link's owner reads.
        target = Path(os.path.realpath(self.path))
        tmp = target.with_suffix(".tmp")
        try:
            with _fresh_file(tmp, target) as out:
                _seek_afresh(f, 0)
                at = 0
                last = b"\n"
                for n, raw in enumerate(f):
                    if at >= plan.end:
                        break
                    at += len(raw)
                    if n not in plan.leave:
                        out.write(raw)
                        last = raw[-1:]
                _seek_afresh(f, plan.end)
                while chunk := f.read(1 << 20):
                    out.write(chunk)
                    last = chunk[-1:]
                if last != b"\n":
                    # A torn last line kept as it was still needs its newline, or the next append
                    # would join it.
                    out.write(b"\n")
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            # A near-whole copy of the quarantine left behind would hold the disk space the
            # collector's appends need, and a failed rewrite is now only a warning.
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        # The rename itself durable too: an append acknowledged after it (the collector's, once
        # a full quarantine made room) was lost with it on a power cut.
        directory = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    @contextmanager
    def _locked(self, create: bool = True) -> Iterator[None]:
        """An exclusive lock beside the file (held by appends and rewrites alike); ``create``:
        make the directory if it is missing."""
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Never through a link (a planted one made a drop create any file its target named),
        # and never a FIFO (opening one blocked a drop and the collector's appends for good).
        lock = _open_regular(self.path.with_suffix(".lock"),
                             os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW)
        try:
            _owned_by_the_spool(lock, self.path.parent)
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        finally:
            os.close(lock)


@dataclass(frozen=True, slots=True)
class _Line:
    """Where an entry's line is in the file."""

    offset: int
    length: int
    """its bytes, newline included"""
    brace: int
    """where its ``{`` is, from its start (after the blanks JSON allows)"""


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which lines a rewrite leaves out, from the file's start to ``end``."""

    leave: set[int]
    """the numbers of the lines left out (the first is 0)"""
    end: int
    """the offset the plan ends at; what follows (appended since) is kept as it is"""
    removed: list[str]
    """the ids of the lines left out for their id"""
    index: dict[str, list[_Line]]
    """where each entry kept is in the file written"""


def _plan(f: BinaryIO, ids: set[str], whole: bool, upto: int | None = None) -> _Plan:
    """Which lines of ``f`` a rewrite leaves out: the entries of ``ids``, and the lines removed
    in place. ``whole``: every line (under the lock); else up to the last newline, without the
    lock: the last line may be an append being written, and what follows the plan is copied as
    it is. A line removed in place stays removed, and a line kept that a replay removes before
    the copy is copied removed: a plan made without the lock holds once it is taken, as long as
    the path names the same file. ``upto``: no line past it (a size seen under the lock: below
    it only a removal in place changes a byte; past it, an append that fails is cut back, and
    what a read without the lock saw of it was never there)."""
    _seek_afresh(f, 0)
    leave: set[int] = set()
    removed: list[str] = []
    index: dict[str, list[_Line]] = {}
    at = end = 0
    for n, raw in enumerate(f):
        complete = raw.endswith(b"\n")
        if not (complete or whole) or (upto is not None and end + len(raw) > upto):
            break
        end += len(raw)
        entry = _entry(raw)
        if entry is not None and entry.id in ids:
            removed.append(entry.id)
            leave.add(n)
        elif entry is None and _removed(raw):
            leave.add(n)
        else:
            length = len(raw) + (not complete)  # a torn last line is given its newline
            if entry is not None:
                index.setdefault(entry.id, []).append(_Line(at, length, _brace(raw)))
            at += length
    return _Plan(leave, end, removed, index)


class Replaying:
    """A replay's view of the quarantine: where each entry is, so that a batch is read, checked
    to be still held, and removed under the lock without reading the whole file.

    The file read stays open. While the path names that same file (an open file keeps its
    inode from being reused), it was only appended to (the collector) or had entries removed in
    place (another replay) since: each entry is where it was, as it was or removed. Once the
    path names another (a drop's rewrite, another replay's), that one is read: before the next
    batch takes the lock, as the first read was made, and under it only if the file was
    rewritten once more meanwhile.
    """

    def __init__(self, quarantine: Quarantine) -> None:
        self._quarantine = quarantine
        self._file: BinaryIO | None = None
        self._index: dict[str, list[_Line]] = {}
        self._removed = 0
        """bytes of the lines removed in place in the file read (as read, and since by this
        replay)"""
        self._settled = 0
        """a size of the file read seen under the lock: the bytes before it are entries as
        appended, or removed (what follows may be an append that fails and is cut back)"""
        self.ids: list[str] = []
        """the entries when it began, each id once, in the file's order"""
        self.unreadable = 0
        """lines that are no entry, as :meth:`Quarantine.scan` counts them"""
        self.unremoved: list[str] = []
        """entries written that stay in the file: it could be neither written in place nor
        rewritten (:meth:`remove_locked`); the next replay writes them again (the history's
        writes are idempotent: it keeps each once) and removes them"""
        self.remove_error: tuple[OSError, OSError] | None = None
        """why they stay: the refusal of the write in place, and the rewrite's failure"""
        self.compact_error: OSError | None = None
        """why a rewrite of this replay's failed (a directory where its temporary goes, a spool
        it may not write): the removals in place stand, and this replay tries no other rewrite
        (each would read the file again for nothing); the next replay, drop or full append
        makes it"""
        with contextlib.suppress(FileNotFoundError):
            self._read(_open_regular(quarantine.path, os.O_RDONLY))
            self.ids = list(self._index)

    @contextmanager
    def held(self, ids: Sequence[str]) -> Iterator[list[Entry]]:
        """Under the quarantine's lock: the entries of ``ids`` still held, read from the file
        now (one for each id, in the order of ``ids``). What is decided inside (writing them)
        cannot be undone by another process (a drop, another replay) before
        :meth:`remove_locked`, in the same block, removes what was written.

        First, without the lock, the file is read again if it was rewritten (as the first read
        was made; under the lock only if it was rewritten once more meanwhile), and when the
        lines removed in place hold 1/:data:`COMPACT_SHARE` of it, it is rewritten without them
        (:meth:`_compact`)."""
        self._follow()
        if self._file is not None and self._may_compact() and \
                self._removed * COMPACT_SHARE >= os.fstat(self._file.fileno()).st_size:
            self._compact()
        with self._quarantine._locked(create=False):
            self._follow()
            if self._file is not None:  # as _settle: already under the lock
                self._settled = os.fstat(self._file.fileno()).st_size
            found = (self._entry(i) for i in ids)
            yield [entry for entry in found if entry is not None]

    def remove_locked(self, ids: Sequence[str]) -> None:
        """Remove the entries of ``ids`` (read by :meth:`held`, in its block), durably: the
        :data:`MARK` over each of their lines, then an fsync."""
        lines = [line for i in ids for line in self._index.get(i, ())]
        if not lines or self._file is None:
            return
        if self.remove_error is not None:  # a rewrite would fail as the last one did
            self.unremoved += [i for i in ids if i in self._index]
            return
        try:
            fd = _open_regular(self._quarantine.path, os.O_WRONLY)
        except OSError as exc:
            if exc.errno not in _NOT_WRITABLE:
                raise
            # A file this user may not write, in a directory it may (another user's, sharing
            # the spool's group), or mounted read-only: removed by a rewrite, as a drop removes.
            self._remove_by_rewrite(ids, exc)
            return
        try:
            if not _same_file(fd, self._file.fileno()):  # replaced under the lock: never so
                self._rewritten(self._quarantine._rewrite_locked(set(ids), compact=False)[1])
                return
            # Each line checked to be that entry's, now: a read without the lock may have
            # indexed an append that failed and was cut back, whose place another line took.
            lines = [line for i in ids for line in self._index.get(i, ()) if self._at(line, i)]
            for line in lines:
                os.pwrite(fd, MARK, line.offset + line.brace)
            os.fsync(fd)
        finally:
            os.close(fd)
        for i in ids:
            self._index.pop(i, None)
        self._removed += sum(line.length for line in lines)

    def _remove_by_rewrite(self, ids: Sequence[str], refused: OSError) -> None:
        """Remove ``ids`` by a rewrite, the file refused to be written in place (``refused``).
        One that fails is not the replay's failure: the history holds the entries, and writes
        them again, keeping each once, when the next replay finds them here
        (:attr:`unremoved`). This replay tries no other (it would fail as this one did)."""
        try:
            index = self._quarantine._rewrite_locked(set(ids), compact=False)[1]
        except OSError as exc:
            self.remove_error = (refused, exc)
            self.unremoved += [i for i in ids if i in self._index]
            return
        self._rewritten(index)

    def _may_compact(self) -> bool:
        """No rewrite failed yet: another would fail as it did, having read the file for it."""
        return self.compact_error is None and self.remove_error is None

    def finish(self) -> None:
        """The file rewritten without the lines removed in place, when there are any: a replay
        that ends leaves the file as a drop does."""
        self._follow()
        if self._removed and self._may_compact():
            self._settle()
            self._compact()

    def _settle(self) -> None:
        """Note, under the lock, the file's size: what an unlocked plan may read up to."""
        with self._quarantine._locked(create=False):
            self._follow()
            if self._file is not None:
                self._settled = os.fstat(self._file.fileno()).st_size

    def _compact(self) -> None:
        """Rewrite the file without the lines removed in place. Which lines go is read without
        the lock (see :func:`_plan`): under it, only the copy, and only if the path still names
        the file planned (else another rewrite was made meanwhile, and is followed)."""
        assert self._file is not None
        plan = _plan(self._file, set(), whole=False, upto=self._settled)
        with self._quarantine._locked(create=False):
            if plan.leave and self._current():
                try:
                    self._quarantine._write_locked(self._file, plan)
                except OSError as exc:
                    # Not the replay's failure: what it wrote is removed in place, durably.
                    self.compact_error = exc
                    return
                self._rewritten(plan.index)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> Replaying:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _entry(self, entry_id: str) -> Entry | None:
        """The entry ``entry_id`` as the file holds it now; None when it is held no more."""
        for line in self._index.get(entry_id, ()):
            if (entry := self._read_at(line)) is not None and entry.id == entry_id:
                return entry
        return None

    def _at(self, line: _Line, entry_id: str) -> bool:
        """Whether ``line`` holds the entry ``entry_id`` now."""
        entry = self._read_at(line)
        return entry is not None and entry.id == entry_id

    def _read_at(self, line: _Line) -> Entry | None:
        if self._file is None:
            return None
        raw = os.pread(self._file.fileno(), line.length, line.offset)
        return _entry(raw) if raw[line.brace:line.brace + 1] == b"{" else None

    def _follow(self) -> None:
        """Read the file again when the path names another than the one read (rewritten)."""
        if not self._quarantine.path.exists():
            self.close()
            self._index, self._removed = {}, 0
        elif not self._current():
            self._read(_open_regular(self._quarantine.path, os.O_RDONLY))

    def _current(self) -> bool:
        """The path names the file read (and kept open)."""
        if self._file is None:
            return False
        try:
            now = os.stat(self._quarantine.path)
        except FileNotFoundError:
            return False
        was = os.fstat(self._file.fileno())
        return (was.st_dev, was.st_ino) == (now.st_dev, now.st_ino)

    def _rewritten(self, index: dict[str, list[_Line]] | None) -> None:
        """After a rewrite of this replay's (None: nothing was written): the file written, and
        where its entries are."""
        if index is not None:
            self.close()
            self._file = os.fdopen(_open_regular(self._quarantine.path, os.O_RDONLY), "rb")
            self._index, self._removed = index, 0
            self._settled = os.fstat(self._file.fileno()).st_size  # written under the lock

    def _read(self, fd: int) -> None:
        """Where each entry of the file open at ``fd`` is; kept open (this replay's file)."""
        self.close()
        self._file = os.fdopen(fd, "rb")
        self._index = {}
        self._removed = self.unreadable = self._settled = at = 0
        for raw in self._file:
            entry = _entry(raw)
            if entry is not None:
                self._index.setdefault(entry.id, []).append(_Line(at, len(raw), _brace(raw)))
            elif _removed(raw):
                self._removed += len(raw)
            else:
                self.unreadable += bool(raw.strip())
            at += len(raw)


def _seek_afresh(f: BinaryIO, offset: int) -> None:
    """Seek ``f`` to ``offset``, dropping what it read ahead: the file may have changed since
    (an append cut back and another in its place, an entry removed in place), and a seek within
    what a buffered reader holds reads the file as it was (a rewrite copied the failed append
    and tore the one that took its place). A seek from the end always drops it."""
    f.seek(0, os.SEEK_END)
    f.seek(offset)


def _same_file(a: int, b: int) -> bool:
    first, second = os.fstat(a), os.fstat(b)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _fresh_file(path: Path, like: Path) -> BinaryIO:
    """A new file at ``path`` for writing, with ``like``'s permissions. Whatever was there (a
    rewrite's leftover) is unlinked first, and the file is made with O_EXCL and O_NOFOLLOW: a
    symlink planted at ``path`` truncated and filled the file it named (any file the user can
    write), and the replace then made the quarantine that link."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        was = os.stat(like)
        # The owner too: a drop run as root (sudo, kubectl exec) made the collector's file
        # root's, 0600, and the collector could no longer append to it (the spool then filled).
        _chown(fd, was.st_uid, was.st_gid)
        os.fchmod(fd, was.st_mode & 0o777)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def _owned_by_the_spool(fd: int, spool: Path) -> None:
    """The lock given to the spool directory's owner when another user holds it: one a root
    ``quarantine drop`` created (root's, 0600) locked the collector out of every append."""
    mine, theirs = os.fstat(fd), os.stat(spool)
    if (mine.st_uid, mine.st_gid) != (theirs.st_uid, theirs.st_gid):
        _chown(fd, theirs.st_uid, theirs.st_gid)


def _chown(fd: int, uid: int, gid: int) -> None:
    """``fd``'s file given to ``uid``:``gid`` where this user may (root); else to ``gid`` alone
    (a member of the collector's group); else left as it is, as on a file system that has no
    owners to give (some FUSE and SMB mounts answer EINVAL or ENOTSUP)."""
    for owner in ((uid, gid), (-1, gid)):
        try:
            os.fchown(fd, *owner)
            return
        except PermissionError:
            continue
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOTSUP):
                return
            raise


def _open_regular(path: Path, flags: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` (and 0600 when created), refused with an
    OSError unless it is a regular file: O_NONBLOCK makes the open of a FIFO return at once, to
    be refused, where it waited for a writer or a reader that never comes."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # said as the open of a directory to write says it
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


_PREFIX = b'{"id": "'


def _quick_id(line: bytes) -> str | None:
    """The id a line as :meth:`Quarantine.add` writes it begins with, read without the rest;
    None for another line. The line may be no entry after all (torn): parse it to know."""
    if line.startswith(_PREFIX) and line[24:25] == b'"' and b"\\" not in line[8:24]:
        return line[8:24].decode("ascii", errors="replace")
    return None


def _brace(line: bytes) -> int:
    """Where the JSON value of a line begins: after the blanks JSON allows before it."""
    return 0 if line[:1] == b"{" else len(line) - len(line.lstrip(b" \t\r"))


def _removed(line: bytes) -> bool:
    """A line a replay removed in place: an entry but for the :data:`MARK` over its ``{``."""
    if line[:1] not in _BLANKS:
        return False
    rest = line.lstrip(b" \t\r")
    return rest[:1] == b'"' and _entry(b"{" + rest) is not None


class _Twice(ValueError):
    """An object that names a key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key!r} named twice")
        self.key = key


def _object(text: str) -> Any:
    """``text`` as JSON, refused (:class:`_Twice`) when its outermost object names a key twice:
    which id, event or tenant the line means cannot be told (json keeps the last, an append's
    quick read of the id saw the first: the event was held twice). The objects inside are the
    event's own, read as the collector reads events."""
    outermost: list[list[tuple[str, Any]]] = [[]]

    def members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        outermost[0] = pairs  # the outermost object is the last one read
        return dict(pairs)

    value = json.loads(text, object_pairs_hook=members)
    pairs = outermost[0]
    if isinstance(value, dict) and len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Twice(key)
            seen.add(key)
    return value


def _entry(line: bytes) -> Entry | None:
    """One line of the file as an entry; None for a line that is none (torn by a crash
    mid-append, which was never acknowledged as quarantined; edited by hand; naming a key
    twice)."""
    try:
        d = _object(line.decode("ascii", errors="replace"))
        found = d["id"]
        if not isinstance(found, str):  # 123 listed as "123" matched no line to remove
            return None
        return Entry(found, _time(d["at"]), str(d["reason"]), d["event"],
                     str(d.get("tenant") or DEFAULT_TENANT))
    except (ValueError, KeyError, TypeError, RecursionError):
        # RecursionError: a line nested deeper than Python reads (written by hand, not by a
        # collector, whose events hold 32 levels at most) is no entry either.
        return None
