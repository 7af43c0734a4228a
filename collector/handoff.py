"""Parsed events handed from ingest to the history pump in memory, next to the spool.

The spool stays the source of truth (durable, ordered); this is only a cache of what ingest
already decoded and validated, so that in steady state the pump does not read the spool back and
parse every event a second time (half of the collector's CPU per event before it existed, see
docs/benchmarks.md). The pump uses an entry only when it starts exactly at the spool's cursor;
otherwise (a restart, or entries refused because the cache was full) it reads the spool from
disk as before, and entries the cursor has passed are dropped.

Entries keep the parsed events without Spark's JSON payload (already in the spool; history rows
are built from the parsed fields), half the memory per event, so twice the events fit the same
bound.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from sparkwatch.model.events import Envelope, ParsedEvent
from sparkwatch.spool import Position


@dataclass(frozen=True, slots=True)
class Spooled:
    start: Position
    end: Position
    events: list[ParsedEvent]


class Handoff:
    """Thread-safe; bounded by ``max_events`` (beyond it entries are refused, not queued)."""

    def __init__(self, max_events: int) -> None:
        self._max_events = max_events
        self._entries: deque[Spooled] = deque()
        self._events = 0
        self._lock = threading.Lock()

    def offer(self, start: Position, end: Position, events: list[ParsedEvent]) -> bool:
        """Called in spool order, right after the append of these events."""
        with self._lock:
            if self._events + len(events) > self._max_events:
                return False
            self._entries.append(Spooled(start, end, [_without_payload(e) for e in events]))
            self._events += len(events)
            return True

    def take(self, cursor: Position, max_events: int) -> tuple[list[ParsedEvent], Position] | None:
        """Events of the records from ``cursor`` on (whole records, stopping once ``max_events``
        is reached) and the position after them; None when the record at ``cursor`` is not here."""
        with self._lock:
            self._drop_before(cursor)
            if not self._entries or self._entries[0].start != cursor:
                return None
            events: list[ParsedEvent] = []
            position = cursor
            for entry in self._entries:
                if entry.start != position or (events and len(events) >= max_events):
                    break
                events.extend(entry.events)
                position = entry.end
            return events, position

    def _drop_before(self, cursor: Position) -> None:
        while self._entries and self._entries[0].end <= cursor:
            self._events -= len(self._entries.popleft().events)

    def __len__(self) -> int:
        with self._lock:
            return self._events


_NO_PAYLOAD: dict[str, object] = {}


def _without_payload(parsed: ParsedEvent) -> ParsedEvent:
    e = parsed.envelope
    return ParsedEvent(Envelope(e.kind, e.app, e.received_at, _NO_PAYLOAD), parsed.event)
