"""Moves accepted events from the spool to the SQL history, off the request path, in order.

One thread takes the oldest pending records (parsed, from ingest's in-memory handoff when it has
them, see :mod:`.handoff`; else read back from the spool), writes them in one transaction with the
shared :class:`~sparkwatch.history.writer.HistoryWriter` (idempotent on run id and batch id)
and only then commits the spool cursor. When the database is down the same batch is retried with
exponential backoff and jitter while ingest keeps spooling; a crash between the write and the
cursor commit replays the batch, which the idempotent writer absorbs.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from sparkwatch.collector.handoff import Handoff
from sparkwatch.collector.selfmetrics import SelfMetrics
from sparkwatch.history.engine import describe_url
from sparkwatch.history.errors import HistoryUrlError
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import EventParseError, envelope_from_dict, parse_envelope
from sparkwatch.spool import Position, Spool

log = logging.getLogger(__name__)


class Writer(Protocol):
    url: str

    def write(self, events: Sequence[ParsedEvent]) -> None: ...

    def close(self) -> None: ...


class HistoryPump:
    def __init__(
        self,
        spool: Spool,
        writer: Writer,
        metrics: SelfMetrics,
        batch_size: int,
        backoff: tuple[float, float] = (0.2, 15.0),
        handoff: Handoff | None = None,
    ) -> None:
        self._spool = spool
        self._handoff = handoff
        self._writer = writer
        self._metrics = metrics
        self._batch_size = batch_size
        self._backoff = backoff
        self._stop = threading.Event()
        self.healthy = True
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name="collector-history", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop after the current attempt; what is pending stays in the spool for next time."""
        self._stop.set()
        self._thread.join(timeout)
        self._writer.close()

    def drained(self) -> bool:
        return self._spool.is_empty()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._spool.wait(0.5):
                continue
            events, position = self._next_batch()
            if self._write(events):
                self._spool.commit(position)

    def _next_batch(self) -> tuple[list[ParsedEvent], Position]:
        """From memory when ingest handed these records over, else read back from the spool."""
        if self._handoff is not None:
            taken = self._handoff.take(self._spool.cursor, self._batch_size)
            if taken is not None:
                return taken
        records, position = self._spool.read(self._batch_size)
        return decode_records(records), position

    def _write(self, events: list[ParsedEvent]) -> bool:
        """Write until it succeeds (True) or the pump stops (False)."""
        delay, ceiling = self._backoff
        failures = 0
        while not self._stop.is_set():
            try:
                self._writer.write(events)
            except HistoryUrlError as exc:
                # Checked at startup, so this is e.g. a driver missing: keep spooling, say so.
                self._failed(exc, failures := failures + 1)
            except Exception as exc:  # noqa: BLE001 - any database error: retry, never die
                self._failed(exc, failures := failures + 1)
            else:
                if failures:
                    log.info("history writes resumed after %d failed attempts", failures)
                self.healthy, self.last_error = True, None
                self._metrics.history_up.set(1)
                self._metrics.written.inc(len(events))
                return True
            self._stop.wait(delay * random.uniform(0.5, 1.5))
            delay = min(delay * 2, ceiling)
        return False

    def _failed(self, exc: Exception, failures: int) -> None:
        self.healthy = False
        self.last_error = _one_line(exc)
        self._metrics.history_up.set(0)
        self._metrics.write_failures.inc()
        if failures == 1 or failures % 20 == 0:
            log.warning("history write to %s failed (attempt %d, events stay spooled): %s",
                        describe_url(self._writer.url), failures, self.last_error)


def decode_records(records: list[Any]) -> list[ParsedEvent]:
    """Spooled wire envelopes back to events (validated at ingest, so failures are bugs)."""
    events = []
    for record in records:
        for item in record:
            try:
                events.append(parse_envelope(envelope_from_dict(item)))
            except EventParseError as exc:
                log.error("dropping a spooled event that no longer parses: %s", exc)
    return events


def _one_line(exc: Exception) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0]
