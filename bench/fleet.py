"""A synthetic fleet of streaming queries built from real Spark progress, for the collector benches.

Every event is a real PySpark 4.3 progress (``tests/fixtures/spark-4.3.0``) whose state operators
are four real operators (aggregation, dedupe, stream-stream join, session window) with their real
custom metrics, RocksDB (≈40 keys each, the production provider) or HDFS (≈7–10 keys). Only the
identity (query id, run id, name, batch id, timestamp) and the counters change per event, so
values move from batch to batch as they do in a real fleet.
"""

from __future__ import annotations

import copy
import json
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "spark-4.3.0"
Provider = Literal["rocksdb", "hdfs"]
# Fixture -> operator index taken from its last progress: four different kinds, one event.
OPERATOR_SOURCES = (
    ("chained", 0),  # stateStoreSave
    ("chained", 1),  # dedupe
    ("join", 0),  # symmetricHashJoin
    ("session_window", 0),  # sessionWindowStateStoreSaveExec
)
APP = {"name": "bench-fleet", "id": "app-bench-0001", "spark_version": "4.3.0"}
EPOCH = datetime(2026, 11, 1, tzinfo=UTC).timestamp()


def _last_progress(name: str, provider: Provider) -> dict[str, Any]:
    data = json.loads((FIXTURES / f"{name}_{provider}.json").read_text())
    return dict(data["progress"][-1])


@dataclass(frozen=True, slots=True)
class Fleet:
    """``queries`` queries of one app; event ``i`` is batch ``i // queries`` of query
    ``i % queries`` (every query advances one batch per round, like a fleet on one trigger)."""

    queries: int
    provider: Provider = "rocksdb"
    trigger_seconds: float = 10.0
    app: str = APP["name"]

    def template(self) -> dict[str, Any]:
        base = _last_progress("chained", self.provider)
        base["stateOperators"] = [
            copy.deepcopy(_last_progress(name, self.provider)["stateOperators"][index])
            for name, index in OPERATOR_SOURCES
        ]
        return base

    def query_id(self, q: int) -> str:
        return str(uuid.UUID(int=(zlib.crc32(self.app.encode()) & 0xFFFF) << 64 | q))

    def run_id(self, q: int) -> str:
        return str(uuid.UUID(int=(1 << 127) | (zlib.crc32(self.app.encode()) & 0xFFFF) << 64 | q))

    def events(self, start: int = 0, count: int | None = None) -> Iterator[dict[str, Any]]:
        """Wire envelopes (what the push sink sends) for events ``start`` .. ``start+count``."""
        template = self.template()
        stop = start + (self.queries if count is None else count)
        for i in range(start, stop):
            yield self.envelope(template, i)

    def envelope(self, template: dict[str, Any], i: int) -> dict[str, Any]:
        q, batch = i % self.queries, i // self.queries
        t = EPOCH + batch * self.trigger_seconds + (q % 1000) / 1000.0
        payload = dict(template)
        payload.update(
            id=self.query_id(q), runId=self.run_id(q), name=f"fleet_q{q:05d}", batchId=batch,
            timestamp=datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            numInputRows=100 + (i * 7) % 900,
        )
        payload["stateOperators"] = [
            {**op, "numRowsTotal": 1000 + batch * 10 + k, "numRowsUpdated": 10 + (i + k) % 50,
             "memoryUsedBytes": 1_000_000 + batch * 1024 + k}
            for k, op in enumerate(template["stateOperators"])
        ]
        return {"kind": "progress", "app": {**APP, "name": self.app},
                "received_at": t + 0.05, "payload": payload}


def wire_size(fleet: Fleet) -> int:
    """Bytes of one event as compact JSON (what a push carries per event, before gzip)."""
    return len(json.dumps(next(fleet.events(0, 1)), separators=(",", ":")))
