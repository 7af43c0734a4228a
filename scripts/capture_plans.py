#!/usr/bin/env python
"""Capture the executed plans of real stateful queries as plan-parsing test fixtures.

Runs every workload of tests/workloads.py and the plan scenarios of tests/stateful_scenarios.py
on local Spark (``availableNow``), reads each query's plan exactly as the listener does
(``sparkwatch.plan.jvm.read_raw_plan``) and writes
``tests/fixtures/plans/spark-<version>/<name>.json``:

    {"spark_version", "name", "operators": [progress operatorNames], "raw": RawPlan}

Run it under each supported PySpark, e.g. ``.venv-spark35/bin/python scripts/capture_plans.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.local import local_spark  # noqa: E402
from sparkwatch.plan.jvm import read_raw_plan  # noqa: E402
from tests import stateful_scenarios, workloads  # noqa: E402

PLAN_SCENARIOS = (
    "chained",
    "two_aggregations",
    "agg_watermark_not_key",
    "agg_no_watermark",
    "dedupe_no_watermark",
    "join_no_bounds",
)
PLACEHOLDER = "/tmp/sparkwatch-plans"


def session() -> Any:
    return local_spark("sparkwatch-capture-plans")


def start(spark: Any, name: str, root: Path) -> Any:
    if name in workloads.WORKLOADS:
        return workloads.start(spark, name, root)
    scenario = stateful_scenarios.SCENARIOS[name]
    return stateful_scenarios.start(spark, scenario, root, {"availableNow": True})


def capture(spark: Any, name: str, tmp: Path) -> dict[str, Any]:
    query = start(spark, name, tmp / name)
    assert query.awaitTermination(180), f"{name} did not finish"
    assert query.exception() is None, f"{name} failed: {query.exception()}"
    last = workloads.progress_dicts(query)[-1]
    raw = read_raw_plan(query._jsq, str(query.id), str(query.runId)).to_dict()
    text = json.dumps(raw).replace(str(tmp), PLACEHOLDER)
    return {
        "spark_version": spark.version,
        "name": name,
        "operators": [op["operatorName"] for op in last["stateOperators"]],
        "raw": json.loads(text),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="workloads/scenarios (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "plans")
    args = parser.parse_args(argv)
    spark = session()
    names = args.names or [*workloads.supported(), *PLAN_SCENARIOS]
    out = args.out / f"spark-{spark.version}"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            fixture = capture(spark, name, Path(tmp))
            (out / f"{name}.json").write_text(json.dumps(fixture, indent=1) + "\n")
            print(f"{name}: {', '.join(fixture['operators'])}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
