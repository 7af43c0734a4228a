"""The history writer's typed reader of the spool (``collector/typedwire.py``): whatever it reads
is exactly what the exact parser makes of the same record, and whatever it is unsure of goes to
the exact parser, so every message and the quarantine stay as they were."""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest

from bench.fleet import Fleet
from sparkwatch.collector.body import events_of
from sparkwatch.collector.history_process import _wire, decode_tenant_records
from sparkwatch.collector.ingest import canonical_event, check_events
from sparkwatch.collector.typedwire import RawPayload, typed_body, typed_record
from sparkwatch.jsoncodec import LEAN_DECODE_BYTES, loads
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


def fleet_body(events: int = 20) -> bytes:
    fleet = Fleet(queries=10, provider="rocksdb")
    template = fleet.template()
    return orjson.dumps({"events": [fleet.envelope(template, i) for i in range(events)]})


def test_a_canonical_body_of_progress_events_is_read_typed_as_the_contract_reads_it() -> None:
    body = fleet_body()
    items, strict = events_of(body, 500)
    exact = check_events(items, body if strict else None)
    typed = typed_body(body, 500, canonical_event)
    assert typed is not None and len(typed) == 20
    for (parsed, encoded), (want, want_encoded) in zip(typed, exact, strict=True):
        assert parsed == want and encoded == want_encoded


@pytest.mark.parametrize("change", [
    lambda b: b.replace(b'{"events":[', b'{"events": [', 1),  # spaced
    lambda b: b.replace(b'"kind":"progress"', b'"kind":"progress","kind":"progress"', 1),
    lambda b: b.replace(b'{"events":[', b'{"events":[],"events":[', 1),
    lambda b: b.replace(b'"batchId":0', b'"batchId":0,"batchId":0', 1),
    lambda b: b.replace(b'"numRowsTotal":', b'"numRowsTotal":1,"numRowsTotal":', 1),
    lambda b: b.replace(b'"operatorName":"', b'"operatorName":"\\u0000', 1),
    lambda b: b.replace(b'"batchId":0', b'"batchId":-1', 1),
    lambda b: b.replace(b'"batchId":0', b'"batchId":92233720368547758070', 1),
    lambda b: b.replace(b'"name":"fleet', b'"name":"\\u00e9', 1),
    lambda b: b[:-2] + b',' + b'[' * 5000 + b']' * 5000 + b']}',
], ids=["spaced", "key twice", "events twice", "payload key twice", "operator key twice",
        "NUL escape", "negative id", "long integer", "escaped text", "deep"])
def test_a_body_the_structs_cannot_vouch_for_takes_the_exact_way(change: Any) -> None:
    assert typed_body(fleet_body(), 500, canonical_event) is not None
    assert typed_body(change(fleet_body()), 500, canonical_event) is None


def test_a_body_over_the_event_limit_takes_the_exact_way_which_answers_413() -> None:
    assert typed_body(fleet_body(20), 19, canonical_event) is None


def test_a_body_over_the_lean_decode_size_takes_the_exact_way_which_holds_less_of_it() -> None:
    """The typed way keeps the body, each event's copy and the parsed events at once: over 4 MiB
    the exact way keeps a request within the memory budget (docs/collector.md, "Memory")."""
    small, large = fleet_body(500), fleet_body(1000)
    assert len(small) <= LEAN_DECODE_BYTES < len(large)
    assert typed_body(small, 1000, canonical_event) is not None
    assert typed_body(large, 1000, canonical_event) is None


def test_a_canonical_body_mixing_in_other_kinds_reads_them_as_the_contract_does() -> None:
    run = run_events(**fresh_ids())
    progress = orjson.loads(fleet_body(3))["events"]
    body = orjson.dumps({"events": [run[0], *progress, run[-1]]})
    items, strict = events_of(body, 500)
    exact = check_events(items, body if strict else None)
    typed = typed_body(body, 500, canonical_event)
    assert typed is not None and [e for _, e in typed] == [e for _, e in exact]
    assert [p for p, _ in typed] == [p for p, _ in exact]
    assert {p.envelope.kind.value for p, _ in typed} == {"started", "progress", "terminated"}


def test_a_progress_event_the_structs_are_unsure_of_reads_as_the_contract_reads_it() -> None:
    body = fleet_body(3).replace(b'"batchId":0', b'"batchId":0.0', 1)  # Spark writes integers
    items, strict = events_of(body, 500)
    exact = check_events(items, body if strict else None)
    typed = typed_body(body, 500, canonical_event)
    assert typed is not None and typed == exact and typed[0][0].event.batch_id == 0
