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
        default ``default``); durable on return. Returns how many were new."""
        if not items:
            return 0
        owners = list(tenants) if tenants is not None else [DEFAULT_TENANT] * len(items)
        with self._locked() as known:
            fresh = [(entry_id(event), event, reason, tenant)
                     for (event, reason), tenant in zip(items, owners, strict=True)]
            fresh = [(i, e, r, t) for i, e, r, t in fresh if i not in known]
            lines = [json.dumps({"id": i, "at": time.time(), "reason": r, "event": e,
                                 **({"tenant": t} if t != DEFAULT_TENANT else {})},
                                ensure_ascii=True, default=str) + "\n" for i, e, r, t in fresh]
            held = self.path.stat().st_size if self.path.exists() else 0
            adding = sum(map(len, lines))
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
        listing says so rather than show fewer entries without a word. Blank lines are not
        counted."""
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
                    unreadable += bool(raw.strip())
                else:
                    out.append(entry)
        return out, unreadable

    def remove(self, ids: set[str]) -> int:
        """Drop the entries with these ids (rewritten atomically); how many were removed. Every
        other line is kept byte for byte (its tenant and any field this version does not know),
        and nothing is written when nothing matches. The directory must exist: removing never
        creates a spool."""
        with self.locked():
            return len(self.remove_locked(ids))

    @contextmanager
    def locked(self) -> Iterator[set[str]]:
        """Hold the quarantine's lock (appends and rewrites wait for it), yielding the ids held
        now: what is decided inside it (a replay writing an entry, a drop) cannot be undone by
        another process before it is done. Never creates a spool directory."""
        with self._locked(create=False) as held:
            yield held

    def remove_locked(self, ids: set[str]) -> list[str]:
        """:meth:`remove`, inside :meth:`locked` (the lock is not taken again: a second flock
        of this process would wait for itself); the id of each line removed."""
        try:
            with os.fdopen(_open_regular(self.path, os.O_RDONLY), "rb") as f:
                lines = f.readlines()  # split at b"\n" only: each line as it was
        except FileNotFoundError:
            return []
        kept = []
        removed = []
        for line in lines:
            found = _line_id(line)
            if found is not None and found in ids:
                removed.append(found)
            else:
                kept.append(line)
        if not removed:
            return []
        # A symlinked quarantine is rewritten where the link points: replacing the link with a
        # file would leave the dropped entries in the target, which the link's owner reads.
        target = Path(os.path.realpath(self.path))
        tmp = target.with_suffix(".tmp")
        with _fresh_file(tmp, target) as f:
            # A torn last line kept as it was still needs its newline, or the next append
            # would join it.
            f.writelines(line if line.endswith(b"\n") else line + b"\n" for line in kept)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        return removed

    @contextmanager
    def _locked(self, create: bool = True) -> Iterator[set[str]]:
        """An exclusive lock beside the file (held by appends and rewrites alike), and the ids
        already quarantined; ``create``: make the directory if it is missing."""
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
                yield {e.id for e in self.entries()}
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        finally:
            os.close(lock)


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


def _line_id(line: bytes) -> str | None:
    """The id of one line of the file, or None for a line that is not an entry (torn)."""
    entry = _entry(line)  # as scan() reads it, so that every id it lists can be removed
    return None if entry is None else entry.id


def _entry(line: bytes) -> Entry | None:
    """One line of the file as an entry; None for a line that is none (torn by a crash
    mid-append, which was never acknowledged as quarantined; edited by hand)."""
    try:
        d = json.loads(line.decode("ascii", errors="replace"))
        found = d["id"]
        if not isinstance(found, str):  # 123 listed as "123" matched no line to remove
            return None
        return Entry(found, _time(d["at"]), str(d["reason"]), d["event"],
                     str(d.get("tenant") or DEFAULT_TENANT))
    except (ValueError, KeyError, TypeError, RecursionError):
        # RecursionError: a line nested deeper than Python reads (written by hand, not by a
        # collector, whose events hold 32 levels at most) is no entry either.
        return None
