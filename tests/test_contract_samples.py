"""Every event Spark wrote in the fixtures passes the validation contract as Spark wrote it: the
collector accepts it on each of its ways in (value by value, the canonical body's cheap check,
the typed reading), and the listener passes it on unchanged, with its rates as Spark gave them.

The fixtures: PySpark 3.5.9 and 4.3.0 runs (started, progress, idle, terminated), the progress
samples of both lines (``progress-samples/``, a copy of the shared samples, and ``history/``) and
the doctor's recorded events. Plans (``plans/``) are no events: the plan contract reads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from sparkwatch.collector.body import events_of
from sparkwatch.collector.ingest import canonical_event, check_events
from sparkwatch.collector.typedwire import typed_body
from sparkwatch.model.contract import ContractViolation
from sparkwatch.model.events import AppInfo, EventKind, QueryProgress
from sparkwatch.model.parse import listener_event, parse_payload

FIXTURES = Path(__file__).parent / "fixtures"
NOT_EVENTS = ("plans",)
APP = {"name": "samples-app", "id": "app-samples-0001", "spark_version": "4.3.0"}
RUN_KINDS = ("started", "idle", "terminated")


def spark_events() -> list[tuple[str, str, dict[str, Any]]]:
    """(label, kind, payload as Spark wrote it) of every event in the fixtures' JSON files."""
    events = []
    for path in sorted(FIXTURES.rglob("*.json")):
        label = str(path.relative_to(FIXTURES))
        if label.startswith(NOT_EVENTS):
            continue
        events += [(f"{label}:{where}", kind, payload)
                   for where, kind, payload in _events_of(json.loads(path.read_text()), label)]
    return events


def _events_of(doc: Any, label: str) -> list[tuple[str, str, dict[str, Any]]]:
    if "batchId" in doc:  # one progress sample
        return [("progress", "progress", doc)]
    if isinstance(doc.get("progress"), list):  # a recorded run
        return ([(f"progress[{i}]", "progress", p) for i, p in enumerate(doc["progress"])]
                + [(kind, kind, doc[kind]) for kind in RUN_KINDS if doc.get(kind)])
    if isinstance(doc.get("events"), list):  # the doctor's: the JSON the listener received
        return [(f"events[{i}]", e["kind"], _unwrapped(json.loads(e["json"])))
                for i, e in enumerate(doc["events"])]
    raise AssertionError(f"{label}: a fixture of no known shape")


def _unwrapped(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["progress"] if "progress" in doc and "batchId" not in doc else doc


SAMPLES = spark_events()
IDS = [label for label, _, _ in SAMPLES]


def _wire(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "app": APP, "received_at": 1795252542.5, "payload": payload}


def test_the_samples_are_every_event_of_both_spark_lines() -> None:
    files = {label.split(":")[0] for label in IDS}
    assert len(files) == len([p for p in FIXTURES.rglob("*.json")
                              if not str(p.relative_to(FIXTURES)).startswith(NOT_EVENTS)])
    assert {"progress-samples/window_agg.json", "progress-samples/spark-3.5.9/window_agg.json",
            "spark-3.5.9/join_rocksdb.json", "spark-4.3.0/join_rocksdb.json"} <= files
    assert {kind for _, kind, _ in SAMPLES} == {"started", "progress", "idle", "terminated"}
    assert sum(kind == "progress" for _, kind, _ in SAMPLES) > 200


@pytest.mark.parametrize(("label", "kind", "payload"), SAMPLES, ids=IDS)
def test_the_collector_accepts_each_spark_event_on_every_way_in(
    label: str, kind: str, payload: dict[str, Any]
) -> None:
    want = parse_payload(kind, payload)
    spaced = json.dumps({"events": [_wire(kind, payload)]}).encode()
    canonical = orjson.dumps({"events": [_wire(kind, payload)]})
    for body in (spaced, canonical):
        items, strict = events_of(body, 10)
        [result] = check_events(items, body if strict else None)
        assert not isinstance(result, ContractViolation), result
        assert result[0].event == want
    typed = typed_body(canonical, 10, canonical_event)
    assert typed is not None
    assert [parsed.event for parsed, _ in typed] == [want]


@pytest.mark.parametrize(("label", "kind", "payload"), SAMPLES, ids=IDS)
def test_the_listener_passes_each_spark_event_on_as_spark_wrote_it(
    label: str, kind: str, payload: dict[str, Any]
) -> None:
    parsed = listener_event(EventKind(kind), json.dumps(payload),
                            AppInfo(APP["name"], APP["id"], APP["spark_version"]), 1795252542.5)
    assert parsed.envelope.payload == payload  # nothing fitted: Spark's values are in range
    assert parsed.event == parse_payload(kind, payload)
    if isinstance(parsed.event, QueryProgress):
        rates = [(parsed.event.input_rows_per_second, parsed.event.processed_rows_per_second),
                 *((s.input_rows_per_second, s.processed_rows_per_second)
                   for s in parsed.event.sources)]
        assert rates == [(payload.get("inputRowsPerSecond"), payload.get("processedRowsPerSecond")),
                         *((s.get("inputRowsPerSecond"), s.get("processedRowsPerSecond"))
                           for s in payload.get("sources", []))]
