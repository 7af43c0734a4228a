"""The history writer in a child process of its own, beside ingest instead of under its GIL.

Ingest (decode, validate, fold into /metrics, spool) keeps one core busy under load; writing the
same events to the history (read back, parse, build rows, COPY) is as much Python work again. In
one process both share one interpreter lock, so the history fell ever further behind a burst
(docs/benchmarks.md, "Collector ingest"). Here the child reads the spooled records from disk
itself: nothing but two positions crosses the pipe, and the spool, its cursor and every retry stay
with the parent's :class:`~sparkwatch.collector.pump.HistoryPump`.

Each request is one attempt: the child answers with what it wrote, or with the error, and never
retries on its own. A child that dies (killed, out of memory) is started again by the next attempt.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sparkwatch.collector.config import DEFAULT_TENANT
from sparkwatch.collector.gctune import release_memory, tune_gc
from sparkwatch.collector.quarantine import (
    DEFAULT_MAX_BYTES,
    RETRIES,
    Quarantine,
)
from sparkwatch.collector.typedwire import RawPayload, TypedRecord, typed_record
from sparkwatch.history import tenancy
from sparkwatch.history.errors import HistoryUrlError, is_data_error, is_database_fault
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.logs import LOG_FORMAT, format_root_handlers
from sparkwatch.model.contract import ContractViolation
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import (
    EventParseError,
    envelope_from_dict,
    envelope_to_dict,
    parse_envelope,
)
from sparkwatch.plan.wire import PlanEvent, is_plan_item, plan_event_to_dict, plan_from_wire
from sparkwatch.spool import Position, read_span
from sparkwatch.summary import one_line

log = logging.getLogger(__name__)

Tenanted = tuple[str, ParsedEvent | PlanEvent]
"""An event (or a run's plan) with the tenant of the token that pushed it."""
CHILD = f"import sys; from {__name__} import main; main(sys.argv[1:])"
"""The child's program: this module imported under its own name (not run as ``__main__``)."""


class WriteFailed(Exception):
    """The attempt wrote nothing; the message is the database's (or the child's) error."""


@dataclass(frozen=True, slots=True)
class Written:
    position: Position
    """The spool position after the last record written."""
    events: int
    quarantined: int = 0
    """events set aside in the quarantine (see :mod:`.quarantine`) instead of written"""


class WriterProcess:
    """Writes spooled records to the history at ``url`` from a child process (:func:`main`).

    Not thread-safe: one pump thread owns it.
    """

    def __init__(self, url: str, migrate: bool, spool_dir: Path,
                 quarantine_max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.url = url
        self._migrate = migrate
        self._spool_dir = Path(spool_dir)
        self._quarantine_max_bytes = quarantine_max_bytes
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id, None before the first write or after :meth:`close`."""
        return self._process.pid if self._process is not None else None

    def write(self, start: Position, end: Position, max_events: int,
              stopping: Callable[[], bool]) -> Written | None:
        """Write the records from ``start`` (before ``end``), whole, up to ``max_events``.

        Raises :class:`WriteFailed` (nothing committed: attempt again). Returns None when
        ``stopping()`` became true before the child answered (the child is then stopped too).
        """
        try:
            conn, process = self._ready()
        except OSError as exc:  # the child died as it started (killed, out of memory)
            code = self._process.poll() if self._process is not None else None
            self._discard()
            raise WriteFailed(f"history writer process ended as it started (exit code {code}): "
                              f"{type(exc).__name__}") from None
        try:
            conn.send((start, end, max_events))
            while not conn.poll(0.2):
                if stopping():
                    self.close()
                    return None
                if process.poll() is not None:
                    raise EOFError
            answer = conn.recv()
        except (EOFError, OSError) as exc:
            self._discard()
            raise WriteFailed(f"history writer process ended (exit code {process.poll()}): "
                              f"{type(exc).__name__}") from None
        return _result(answer)

    def close(self, timeout: float = 5.0) -> None:
        """Ask the child to finish (it ends after its current write) and wait for it."""
        if self._process is None:
            return
        try:
            assert self._conn is not None
            self._conn.send(None)
        except (OSError, ValueError):
            pass
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout)
        self._discard()

    def _ready(self) -> tuple[Connection, subprocess.Popen[bytes]]:
        if self._process is None or self._process.poll() is not None:
            self._discard()
            ours, theirs = socket.socketpair()
            with theirs:
                # The URL may hold a password: it goes over the socket, not the command line.
                # Its own process group: a terminal's Ctrl-C (to the foreground group) would
                # kill it while it starts, before it ignores SIGINT; the parent ends it.
                self._process = subprocess.Popen(
                    [sys.executable, "-c", CHILD, str(theirs.fileno())],
                    pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, process_group=0,
                )
            self._conn = Connection(ours.detach())
            level = logging.getLogger().getEffectiveLevel()
            self._conn.send((self.url, self._migrate, str(self._spool_dir), level,
                             self._quarantine_max_bytes))
        assert self._conn is not None
        return self._conn, self._process

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = self._conn = None


def _result(answer: tuple[Any, ...]) -> Written:
    if answer[0] == "ok":
        return Written(answer[1], answer[2], answer[3])
    raise WriteFailed(answer[1])


def main(argv: list[str]) -> None:
    """The child's entry point: the socket's file descriptor, then settings over it."""
    # Ctrl-C in a terminal reaches the whole process group: the parent decides when this ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(int(argv[0]))
    try:
        url, migrate, spool_dir, level, quarantine_max_bytes = conn.recv()
    except (EOFError, OSError):
        return
    # Logs as the collector does (its stderr, its format and level, Alembic quiet unless debug).
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    format_root_handlers()
    if level > logging.DEBUG:
        logging.getLogger("alembic").setLevel(logging.WARNING)
    serve(conn, url, migrate, spool_dir, quarantine_max_bytes)


def serve(conn: Connection, url: str, migrate: bool, spool_dir: str,
          quarantine_max_bytes: int = DEFAULT_MAX_BYTES) -> None:
    """Answer write requests until the parent says stop or goes away."""
    writer = HistoryWriter(url, migrate=migrate)
    reader = SpanReader(Path(spool_dir))
    quarantine = Quarantine(Path(spool_dir), quarantine_max_bytes)
    failures: dict[Position, int] = {}  # attempts of a span that failed for another reason
    tune_gc()
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break
        if request is None:
            break
        start, end, max_events = request
        try:
            events, position = reader.take(start, end, max_events)
            # The next request starts where this one ends (unless this write fails): read and
            # parse it while the database works on this one.
            reader.prefetch(position, end, max_events)
            bad = _write_or_isolate(writer, events, failures, start)
            unreadable = reader.unreadable.pop(position, [])
            quarantined = quarantine.add([(e, r) for e, r, _ in unreadable + bad],
                                         [t for _, _, t in unreadable + bad])
            _log_quarantined(bad)  # only now: the disk may have refused the quarantine
        except HistoryUrlError as exc:  # e.g. a driver missing: the whole message says which
            answer: tuple[Any, ...] = ("failed", str(exc))
        except Exception as exc:  # noqa: BLE001 - any database error: the parent retries
            answer = ("failed", one_line(exc))
        else:
            failures.pop(start, None)
            answer = ("ok", position, len(events) - len(bad), quarantined)
            if position >= end:  # caught up: nothing read ahead, the batch is garbage now
                del events, bad
                release_memory()
        if not _answer(conn, answer):
            break
    reader.close()
    writer.close()


def _answer(conn: Connection, answer: tuple[Any, ...]) -> bool:
    """Send ``answer``; False when the parent is gone (killed: this process has a group of its
    own, so it outlives it by the write in progress). What it wrote is committed; the parent's
    spool cursor was not moved, so the next collector writes it again, idempotently."""
    try:
        conn.send(answer)
    except OSError:
        return False
    return True


class SpanReader:
    """Spooled records as parsed events, with one span read ahead on a thread of its own."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="history-read-ahead")
        self._ahead: tuple[Position, Future[tuple[list[Tenanted], Position]]] | None = None
        self.unreadable: dict[Position, list[tuple[Any, str, str]]] = {}
        """records of a span (keyed by its end) that no longer parse, for the quarantine"""

    def take(self, start: Position, end: Position, max_events: int
             ) -> tuple[list[Tenanted], Position]:
        """Events of the records from ``start``, whole, up to ``max_events``, and the position
        after them: the span read ahead when it starts there and holds something, else read now.
        """
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == start:
            events, position = ahead[1].result()
            if events:
                return events, position
        return self._read(start, end, max_events)

    def prefetch(self, start: Position, end: Position, max_events: int) -> None:
        if start < end:
            self._ahead = (start, self._pool.submit(self._read, start, end, max_events))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _read(self, start: Position, end: Position, max_events: int
              ) -> tuple[list[Tenanted], Position]:
        records, position = read_span(self._directory, start, end, max_events, typed_record)
        unreadable: list[tuple[Any, str, str]] = []
        events = decode_tenant_records(records, unreadable)
        self.unreadable[position] = unreadable
        return events, position


def decode_records(records: list[Any], unreadable: list[tuple[Any, str]] | None = None
                   ) -> list[ParsedEvent]:
    """The events of spooled records, their tenants and plans left out (see
    :func:`decode_tenant_records`)."""
    failed: list[tuple[Any, str, str]] = []
    events = [event for _, event in decode_tenant_records(records, failed)
              if isinstance(event, ParsedEvent)]
    if unreadable is not None:
        unreadable.extend((item, reason) for item, reason, _ in failed)
    return events


def decode_tenant_records(records: list[Any],
                          unreadable: list[tuple[Any, str, str]] | None = None
                          ) -> list[Tenanted]:
    """Spooled wire envelopes back to (tenant, event) (validated at ingest, so failures are bugs,
    or records of an older collector); what no longer parses goes to ``unreadable`` with the
    reason and tenant (for the quarantine), or is logged and skipped without one. A record is a
    list of events (tenant ``default``, as before tenants) or ``{"tenant": ..., "events": [...]}``.
    """
    events = []
    for record in records:
        tenant, items = _tenant_items(record)
        for item in items:
            try:
                events.append((tenant, item if isinstance(item, ParsedEvent) else _decoded(item)))
            except (EventParseError, ContractViolation) as exc:
                log.error("a spooled event no longer parses: %s", exc)
                if unreadable is not None:
                    unreadable.append((item, f"unreadable: {exc}", tenant))
    return events


def _decoded(item: Any) -> ParsedEvent | PlanEvent:
    if is_plan_item(item):
        return plan_from_wire(item)
    return parse_envelope(envelope_from_dict(item))


def _wire(item: ParsedEvent | PlanEvent) -> dict[str, Any]:
    if isinstance(item, PlanEvent):
        return plan_event_to_dict(item)
    wire = envelope_to_dict(item.envelope)
    if isinstance(item.envelope.payload, RawPayload):  # read typed: the JSON, for the quarantine
        wire["payload"] = item.envelope.payload.value()
    return wire


def _write(writer: HistoryWriter, items: list[Tenanted]) -> list[tuple[Any, str, str]]:
    """Events, then the plans among them (after: a plan names a run its events wrote). Returns
    what the writer left out as another tenant's (:mod:`sparkwatch.history.tenancy`), with the
    reason and tenant: acknowledged at ingest, so it goes to the quarantine, never nowhere."""
    events = [(t, e) for t, e in items if isinstance(e, ParsedEvent)]
    plans = [(t, p) for t, p in items if isinstance(p, PlanEvent)]
    left_out = writer.write([e for _, e in events], [t for t, _ in events])
    out: list[tuple[Any, str, str]] = [(_wire(events[i][1]), tenancy.FOREIGN, events[i][0])
                                       for i in left_out]
    if plans:
        left_out = writer.write_plans([p.plan for _, p in plans], [t for t, _ in plans])
        out += [(_wire(plans[i][1]), tenancy.FOREIGN_PLAN, plans[i][0]) for i in left_out]
    return out


def _tenant_items(record: Any) -> tuple[str, list[Any]]:
    if isinstance(record, TypedRecord):
        return record.tenant or DEFAULT_TENANT, record
    if isinstance(record, dict):
        return str(record.get("tenant") or DEFAULT_TENANT), list(record.get("events") or [])
    return DEFAULT_TENANT, record


def _write_or_isolate(writer: HistoryWriter, events: list[Tenanted],
                      failures: dict[Position, int], start: Position
                      ) -> list[tuple[Any, str, str]]:
    """Write ``events`` in one transaction; when the data is what fails (or the span failed
    :data:`~.quarantine.RETRIES` times for a reason that is not the database being down), write
    them one by one and return those that still fail, with the reason. Raises while the
    database is unavailable: the span is then retried whole."""
    try:
        return _write(writer, events)
    except Exception as exc:
        if is_database_fault(exc):
            raise  # retried whole until the database takes it: the count is for other reasons
        if not is_data_error(exc):
            failures[start] = failures.get(start, 0) + 1
            if failures[start] < RETRIES:
                raise
        log.warning("a span of %d events failed (%s); writing them one by one", len(events),
                    one_line(exc))
    bad: list[tuple[Any, str, str]] = []
    for tenant, event in events:
        try:
            bad += _write(writer, [(tenant, event)])
        except Exception as exc:
            if is_database_fault(exc):
                raise
            bad.append((_wire(event), one_line(exc), tenant))
    return bad


def _log_quarantined(bad: list[tuple[Any, str, str]]) -> None:
    for wire, reason, _ in bad:
        payload = wire.get("payload") or {}
        kind = "plan" if is_plan_item(wire) else wire.get("kind", "?")
        query_id = payload.get("id") or payload.get("query_id") or payload.get("queryId") or "?"
        log.error("quarantined a %s event of query %s: %s", kind, query_id, reason)


