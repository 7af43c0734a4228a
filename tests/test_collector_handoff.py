"""Ingest hands parsed events to the history pump in memory, in spool order, within a bound."""

from __future__ import annotations

from pathlib import Path

from sparkwatch.collector.handoff import Handoff
from sparkwatch.history.rows import rows_for
from sparkwatch.spool import Spool
from tests.test_history_idempotency import RAW
from tests.test_history_support import batch_of, progress


def _events(*batches: int) -> list:
    return [progress(batch_of(RAW, b, f"2026-11-21T09:33:{b:02d}.000Z")) for b in batches]


def _append(spool: Spool, handoff: Handoff, events: list) -> None:
    start, end = spool.append([{"batch": e.event.batch_id} for e in events])
    handoff.offer(start, end, events)


def test_the_pump_takes_whole_records_from_the_cursor_in_order(tmp_path: Path) -> None:
    spool, handoff = Spool(tmp_path, 1 << 20), Handoff(100)
    _append(spool, handoff, _events(0, 1))
    _append(spool, handoff, _events(2))
    _append(spool, handoff, _events(3, 4))
    taken = handoff.take(spool.cursor, 3)
    assert taken is not None
    events, position = taken
    assert [e.event.batch_id for e in events] == [0, 1, 2]  # stops once 3 are reached
    spool.commit(position)
    events, position = handoff.take(spool.cursor, 3) or ([], position)
    assert [e.event.batch_id for e in events] == [3, 4]
    spool.commit(position)
    assert handoff.take(spool.cursor, 3) is None and len(handoff) == 0


def test_records_not_in_memory_are_read_from_the_spool_then_memory_resumes(
    tmp_path: Path,
) -> None:
    spool, handoff = Spool(tmp_path, 1 << 20), Handoff(2)
    _append(spool, handoff, _events(0, 1))
    _append(spool, handoff, _events(2))  # refused: over the bound
    assert len(handoff) == 2
    spool.commit(handoff.take(spool.cursor, 10)[1])  # type: ignore[index]
    assert handoff.take(spool.cursor, 10) is None  # batch 2 is only on disk
    records, position = spool.read(10)
    assert records == [[{"batch": 2}]]
    spool.commit(position)
    _append(spool, handoff, _events(5))
    events, _ = handoff.take(spool.cursor, 10) or ([], None)
    assert [e.event.batch_id for e in events] == [5]


def test_a_restarted_spool_has_nothing_in_memory(tmp_path: Path) -> None:
    spool, handoff = Spool(tmp_path, 1 << 20), Handoff(100)
    _append(spool, handoff, _events(0))
    spool.close()
    reopened = Spool(tmp_path, 1 << 20)
    assert Handoff(100).take(reopened.cursor, 10) is None
    assert list(reopened.pending()) == [[{"batch": 0}]]


def test_handed_off_events_drop_the_payload_but_keep_what_history_rows_need(
    tmp_path: Path,
) -> None:
    """Spark's JSON is in the spool already; rows come from the parsed fields."""
    spool, handoff = Spool(tmp_path, 1 << 20), Handoff(100)
    [original] = _events(7)
    _append(spool, handoff, [original])
    [taken], _ = handoff.take(spool.cursor, 10) or ([None], None)
    assert original.envelope.payload  # the caller's event is untouched
    assert taken.envelope.payload == {}
    assert taken.event is original.event
    assert (taken.app, taken.kind, taken.envelope.received_at) == (
        original.app, original.kind, original.envelope.received_at)
    assert rows_for([taken]) == rows_for([original])
