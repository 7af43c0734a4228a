"""Real column values for the history population: rows the product itself derives from real events.

The operator, source, sink and batch values come from :mod:`bench.fleet`'s template (real PySpark
4.3 progress with real RocksDB / HDFS custom metrics) through the writer's own row functions
(:mod:`sparkwatch.history.rows`); plans from the recorded plan fixtures through the plan mapper.
The population SQL copies these into the database once (``bench_templates``) and varies only
identity, time and counters per row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.fleet import Fleet, Provider
from sparkwatch.history import rows
from sparkwatch.model.parse import parse_progress
from sparkwatch.plan.mapping import map_plan
from sparkwatch.plan.model import RawPlan

PROVIDERS: tuple[Provider, ...] = ("rocksdb", "hdfs")
PLANS = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "plans" / "spark-4.3.0"
# The fleet's four operators, in its order -> (plan fixture, operator index in that plan).
PLAN_OF_KIND = (("chained", 0), ("chained", 1), ("join_no_bounds", 0), ("session_window", 0))


@dataclass(frozen=True, slots=True)
class OperatorTemplate:
    provider: str
    kind: int
    operator_name: str
    num_shuffle_partitions: int
    num_state_store_instances: int
    custom_metrics: dict[str, Any]
    # Two numeric custom metrics the population varies per row (the rest stays as recorded).
    varied: tuple[str, str]
    plan: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Templates:
    operators: list[OperatorTemplate]
    source: dict[str, Any]
    sink: dict[str, Any]


def _progress(provider: Provider) -> Any:
    fleet = Fleet(queries=1, provider=provider)
    return parse_progress(next(fleet.events(0, 1))["payload"])


def _varied(custom: dict[str, Any]) -> tuple[str, str]:
    numeric = [k for k, v in sorted(custom.items()) if isinstance(v, int | float)]
    assert len(numeric) >= 2, f"too few numeric custom metrics: {sorted(custom)}"
    return numeric[0], numeric[-1]


def _plan_rows() -> list[dict[str, Any]]:
    """``operator_plans`` rows (as the plan reader writes them) for the fleet's four operators."""
    out = []
    for name, index in PLAN_OF_KIND:
        data = json.loads((PLANS / f"{name}.json").read_text())
        plan = map_plan(RawPlan.from_dict(data["raw"]), data["operators"], read_at=0.0)
        out.append(rows.plan_rows(plan)[index])
    return out


def load() -> Templates:
    plans = _plan_rows()
    operators = []
    for provider in PROVIDERS:
        progress = _progress(provider)
        for kind, op in enumerate(progress.state_operators):
            row = rows.operator_row(progress, op)
            plan = {k: plans[kind][k] for k in ("kind", "node", "operator_id", "keys",
                                                "output_mode", "watermark_column",
                                                "watermark_delay_ms", "num_state_stores",
                                                "details", "settings")}
            plan["state_store_provider"] = provider
            operators.append(OperatorTemplate(
                provider=provider, kind=kind, operator_name=row["operator_name"],
                num_shuffle_partitions=row["num_shuffle_partitions"],
                num_state_store_instances=row["num_state_store_instances"],
                custom_metrics=row["custom_metrics"], varied=_varied(row["custom_metrics"]),
                plan=plan,
            ))
    progress = _progress("rocksdb")
    assert progress.sink is not None
    return Templates(operators, rows.source_rows(progress)[0], rows.sink_row(progress))
