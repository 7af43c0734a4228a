"""Loading the recorded doctor histories (tests/fixtures/doctor, real Spark runs recorded by
scripts/record_doctor_histories.py) into a history database, through the real parser and writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import AppInfo, EventKind, ParsedEvent
from sparkwatch.model.parse import envelope_from_json, parse_envelope
from sparkwatch.plan.mapping import map_plan
from sparkwatch.plan.model import QueryPlan, RawPlan

DOCTOR = Path(__file__).resolve().parent / "fixtures" / "doctor"
SCENARIOS = sorted(p.stem for p in DOCTOR.glob("*.json"))


def recorded(name: str) -> dict[str, Any]:
    return json.loads((DOCTOR / f"{name}.json").read_text())


def events_of(data: dict[str, Any]) -> list[ParsedEvent]:
    app = AppInfo(**data["app"])
    return [
        parse_envelope(envelope_from_json(EventKind(e["kind"]), e["json"], app, e["received_at"]))
        for e in data["events"]
    ]


def plan_of(data: dict[str, Any], events: list[ParsedEvent]) -> QueryPlan:
    """The plan as the listener maps it, read when the run's first progress arrived."""
    first = next(e for e in events if e.kind is EventKind.PROGRESS)
    raw = RawPlan.from_dict(data["raw_plan"])
    return map_plan(raw, data["operators"], read_at=first.envelope.received_at)


def load(url: str, names: list[str], with_plans: bool = True) -> dict[str, str]:
    """Write the recorded runs to ``url``; returns scenario -> query id."""
    writer = HistoryWriter(url)
    ids = {}
    try:
        for name in names:
            data = recorded(name)
            events = events_of(data)
            writer.write(events)
            if with_plans:
                writer.write_plans([plan_of(data, events)])
            ids[name] = events[0].event.query_id
    finally:
        writer.close()
    return ids
