"""Run by tests/test_fields.py in a fresh interpreter: the field table is loaded from a copy of
sparkwatch/model/fields.py with one more line (argv[1]) before anything of sparkwatch is
imported; a real fixture run whose operators carry that field (argv[2]) then goes through the
parser, the history (a fresh SQLite database created from the metadata, argv[3]), the catalogue
and both expositions. Prints what each of them made of the field, as JSON."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

spec = importlib.util.spec_from_file_location("sparkwatch.model.fields", sys.argv[1])
assert spec is not None and spec.loader is not None
table = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = table  # what every consumer imports from now on
spec.loader.exec_module(table)

import dataclasses  # noqa: E402

import sqlalchemy as sa  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from sparkwatch.history.reader import _state_select  # noqa: E402
from sparkwatch.history.schema import Base  # noqa: E402
from sparkwatch.history.views import StatePoint, to_dict  # noqa: E402
from sparkwatch.history.writer import HistoryWriter  # noqa: E402
from sparkwatch.metrics import catalogue as cat  # noqa: E402
from sparkwatch.metrics.docs import render_metrics_markdown  # noqa: E402
from sparkwatch.metrics.exposition import SparkwatchCollector  # noqa: E402
from sparkwatch.metrics.state import MetricState  # noqa: E402
from sparkwatch.metrics.text import generate  # noqa: E402
from sparkwatch.model.contract import envelope_schema  # noqa: E402
from sparkwatch.model.events import (  # noqa: E402
    AppInfo,
    Envelope,
    EventKind,
    QueryProgress,
    StateOperator,
)
from sparkwatch.model.parse import parse_envelope  # noqa: E402

added = table.OPERATOR_FIELDS[-1]
data = json.loads(Path(sys.argv[2]).read_text())
app = AppInfo("made-up", "local-1", "4.3.0")
payloads = [(EventKind.STARTED, data["started"]),
            *((EventKind.PROGRESS, p) for p in data["progress"])]
events = [parse_envelope(Envelope(kind, app, 0.0, payload)) for kind, payload in payloads]
progress = [e.event for e in events if isinstance(e.event, QueryProgress)]

engine = sa.create_engine(sys.argv[3])
Base.metadata.create_all(engine)
HistoryWriter(sys.argv[3], migrate=False).write(events)
with engine.connect() as conn:
    columns = [c["name"] for c in sa.inspect(conn).get_columns("operator_batches")]
    points = [StatePoint(**row._mapping) for row in conn.execute(
        _state_select(progress[0].query_id, 0, None, None, newest=False))]

state = MetricState(clock=lambda: 1_000_000.0)
for e in events:
    state.apply(e)
registry = CollectorRegistry(auto_describe=False)
registry.register(SparkwatchCollector(state))
ours = [m for m in cat.ALL if m.source == added.json]


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(m.family in line for m in ours)]


out: dict[str, Any] = {
    "state_operator": [f.name for f in dataclasses.fields(StateOperator)],
    "parsed": [getattr(p.state_operators[0], added.attr) for p in progress],
    "openapi": added.json in json.dumps(envelope_schema()),
    "columns": columns,
    "history": [to_dict(p)[added.attr] for p in points],
    "catalogue": [(m.name, m.kind.value, m.help, list(m.labels)) for m in ours],
    "docs": [m.name in render_metrics_markdown() for m in ours],
    "driver": lines(generate_latest(registry).decode()),
    "collector": lines(b"".join(generate(registry)).decode()),
}
print(json.dumps(out))
