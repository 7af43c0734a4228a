#!/usr/bin/env python
"""Record real query histories with known problems as `sparkwatch doctor` test fixtures.

Runs the doctor scenarios of tests/stateful_scenarios.py (aggregation and dropDuplicates without
a watermark, a stream-stream join without time bounds, late data, a healthy watermarked query) on
local Spark with ``availableNow``, keeping every event Spark sent exactly as the sparkwatch
listener receives it (raw JVM JSON) and the executed plan as the plan reader reads it. Writes
``tests/fixtures/doctor/<scenario>.json``:

    {"spark_version", "scenario", "app": {...}, "operators": [...],
     "events": [{"kind", "received_at", "json"}], "raw_plan": {...}}

The doctor tests load these into a fresh history database (SQLite and PostgreSQL) through the
real parser and history writer.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.local import local_spark  # noqa: E402
from sparkwatch.listener.receivers import JvmReceiver, register_jvm  # noqa: E402
from sparkwatch.model.events import EventKind  # noqa: E402
from sparkwatch.plan.jvm import read_raw_plan  # noqa: E402
from tests import stateful_scenarios  # noqa: E402
from tests.workloads import progress_dicts  # noqa: E402

PLACEHOLDER = "/tmp/sparkwatch-doctor"


class Recorder:
    """Every raw event, as the listener's JVM receiver hands it to the intake."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def offer(self, kind: EventKind, raw_json: str) -> None:
        with self._lock:
            self.events.append({"kind": kind.value, "received_at": time.time(), "json": raw_json})

    def of_query(self, query_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if _query_id(e["json"]) == query_id]


def _query_id(raw_json: str) -> str | None:
    payload = json.loads(raw_json)
    return payload.get("id") or (payload.get("progress") or {}).get("id")


def session() -> Any:
    return local_spark("sparkwatch-doctor-fixtures")


def record(spark: Any, recorder: Recorder, name: str, tmp: Path) -> dict[str, Any]:
    scenario = stateful_scenarios.SCENARIOS[name]
    query = stateful_scenarios.start(spark, scenario, tmp / name, {"availableNow": True})
    assert query.awaitTermination(180), f"{name} did not finish"
    assert query.exception() is None, f"{name} failed: {query.exception()}"
    query_id = str(query.id)
    deadline = time.monotonic() + 30
    while not any(e["kind"] == "terminated" for e in recorder.of_query(query_id)):
        assert time.monotonic() < deadline, f"{name}: no termination event"
        time.sleep(0.1)
    raw = read_raw_plan(query._jsq, query_id, str(query.runId)).to_dict()
    fixture = {
        "spark_version": spark.version,
        "scenario": name,
        "app": {"name": "doctor-fixtures", "id": spark.sparkContext.applicationId,
                "spark_version": spark.version},
        "operators": [op["operatorName"] for op in progress_dicts(query)[-1]["stateOperators"]],
        "events": recorder.of_query(query_id),
        "raw_plan": raw,
    }
    return json.loads(json.dumps(fixture).replace(str(tmp), PLACEHOLDER))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scenarios (default: the doctor scenarios)")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "doctor")
    args = parser.parse_args(argv)
    spark = session()
    recorder = Recorder()
    remove = register_jvm(spark, JvmReceiver(recorder.offer, lambda: None))
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name in args.names or stateful_scenarios.DOCTOR_SCENARIOS:
                fixture = record(spark, recorder, name, Path(tmp))
                (args.out / f"{name}.json").write_text(json.dumps(fixture, indent=1) + "\n")
                print(f"{name}: {len(fixture['events'])} events")
    finally:
        remove()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
