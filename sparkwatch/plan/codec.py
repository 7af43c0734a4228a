"""Plans as JSON-ready dicts and back (history details, doctor and top's JSON, fixtures)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sparkwatch.plan.model import OperatorIdentity, QueryPlan, Source, Watermark


def identity_to_dict(op: OperatorIdentity) -> dict[str, Any]:
    return {
        "index": op.index,
        "operator": op.operator,
        "kind": op.kind,
        "node": op.node,
        "operator_id": op.operator_id,
        "keys": list(op.keys),
        "event_time_keys": list(op.event_time_keys),
        "output_mode": op.output_mode,
        "watermark_column": op.watermark_column,
        "watermark_delay_ms": op.watermark_delay_ms,
        "watermarks": [{"column": w.column, "delay_ms": w.delay_ms} for w in op.watermarks],
        "num_state_stores": op.num_state_stores,
        "state_store_provider": op.state_store_provider,
        "checkpoint_location": op.checkpoint_location,
        "details": dict(op.details),
    }


def identity_from_dict(data: Mapping[str, Any]) -> OperatorIdentity:
    return OperatorIdentity(
        index=int(data["index"]),
        operator=str(data["operator"]),
        kind=str(data["kind"]),
        node=data.get("node"),
        operator_id=data.get("operator_id"),
        keys=tuple(data.get("keys") or ()),
        event_time_keys=tuple(data.get("event_time_keys") or ()),
        output_mode=data.get("output_mode"),
        watermarks=tuple(
            Watermark(str(w["column"]), w.get("delay_ms")) for w in data.get("watermarks") or ()
        ),
        num_state_stores=data.get("num_state_stores"),
        state_store_provider=data.get("state_store_provider"),
        checkpoint_location=data.get("checkpoint_location"),
        details=dict(data.get("details") or {}),
    )


def plan_to_dict(plan: QueryPlan) -> dict[str, Any]:
    return {
        "query_id": plan.query_id,
        "run_id": plan.run_id,
        "source": plan.source.value,
        "batch_id": plan.batch_id,
        "read_at": plan.read_at,
        "note": plan.note,
        "settings": dict(plan.settings),
        "trigger": plan.trigger,
        "trigger_interval_ms": plan.trigger_interval_ms,
        "operators": [identity_to_dict(op) for op in plan.operators],
    }


def plan_from_dict(data: Mapping[str, Any]) -> QueryPlan:
    return QueryPlan(
        query_id=str(data["query_id"]),
        run_id=str(data["run_id"]),
        source=Source(data.get("source", Source.PLAN.value)),
        operators=tuple(identity_from_dict(op) for op in data.get("operators") or ()),
        batch_id=data.get("batch_id"),
        read_at=float(data.get("read_at") or 0.0),
        note=data.get("note"),
        settings=dict(data.get("settings") or {}),
        trigger=data.get("trigger"),
        trigger_interval_ms=data.get("trigger_interval_ms"),
    )
