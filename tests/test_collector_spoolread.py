"""The history writer's typed reader of the spool (``collector/spoolread.py``): whatever it reads
is exactly what the exact parser makes of the same record, and whatever it is unsure of goes to
the exact parser, so every message and the quarantine stay as they were."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from sparkwatch.collector.history_process import _wire, decode_tenant_records
from sparkwatch.collector.spoolread import RawPayload, typed_record
from sparkwatch.jsoncodec import loads
from sparkwatch.model.events import ParsedEvent
from tests.hostile import MUTATIONS, body_of, progress_event
from tests.test_collector_support import fresh_ids, run_events


def both_ways(record: bytes) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """(events, unreadable) read typed, then read as the writer did before: JSON, exact parse."""
    typed_bad: list[Any] = []
    exact_bad: list[Any] = []
    typed = decode_tenant_records([typed_record(record)], typed_bad)
    exact = decode_tenant_records([loads(record)], exact_bad)
    return typed, exact, typed_bad, exact_bad


def test_a_recorded_run_reads_the_same_typed_as_exactly_and_its_progress_goes_the_typed_way(
) -> None:
    events = run_events(**fresh_ids())
    record = orjson.dumps(events)
    typed, exact, typed_bad, exact_bad = both_ways(record)
    assert typed == exact and len(typed) == len(events)
    assert typed_bad == exact_bad == []
    read = typed_record(record)
    progress = [item for item, event in zip(read, events, strict=True)
                if event["kind"] == "progress"]
    assert progress and all(isinstance(item, ParsedEvent) for item in progress)
    assert [_wire(e) for _, e in typed] == [_wire(e) for _, e in exact]


def test_a_tenant_record_keeps_its_tenant() -> None:
    events = run_events(**fresh_ids())
    record = orjson.dumps({"tenant": "acme", "events": events})
    typed, exact, _, _ = both_ways(record)
    assert typed == exact
    assert {tenant for tenant, _ in typed} == {"acme"}


@pytest.mark.parametrize("name,mutate,expect", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_hostile_event_spooled_by_an_older_collector_reads_as_the_exact_parser_reads_it(
    name: str, mutate: Any, expect: str
) -> None:
    event = progress_event("q-hostile", "r-hostile", 3)
    mutate(event)
    typed, exact, typed_bad, exact_bad = both_ways(body_of([event]))
    assert typed == exact
    assert typed_bad == exact_bad
    assert len(typed) + len(typed_bad) == 1


def test_the_payload_read_typed_is_the_spooled_json_when_the_quarantine_asks() -> None:
    event = progress_event("q-1", "r-1", 7)
    event["payload"]["futureField"] = {"nested": [1, "two", None]}
    [item] = typed_record(orjson.dumps([event]))
    assert isinstance(item, ParsedEvent) and isinstance(item.envelope.payload, RawPayload)
    assert _wire(item)["payload"] == event["payload"]
    assert _wire(item)["received_at"] == pytest.approx(event["received_at"])
    assert item.envelope.received_at <= time.time()
