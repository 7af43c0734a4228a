"""A run's plan on the wire: what the push sink sends beside the events, what the collector
accepts, spools and writes.

One more entry kind in the ``events`` array of a push (``{"kind": "plan", "app", "received_at",
"payload": <plan>}``, the payload as :func:`sparkwatch.plan.codec.plan_to_dict` writes it), so the
plan travels the same ordered, retried and spooled path as the events it names: it follows the
run's first progress, and the collector folds it into the same query state.

The collector validates it like any event (:func:`plan_from_wire`): every value through the
contract (:mod:`sparkwatch.model.contract`: no NUL, no lone surrogate, 64-bit integers, finite
floats, bounded nesting), every typed field checked and capped, and a refusal names the field
(``plan.operators[1].kind: ...``). The listener never sends what would be refused
(:func:`plan_to_wire` fits its strings to the caps).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sparkwatch.model.contract import (
    INT32_MAX,
    LATEST_EPOCH,
    LIMITS,
    ContractViolation,
    check_count,
    check_id,
    check_text,
    check_tree,
    child,
    conform,
    fail,
    fit,
)
from sparkwatch.model.events import AppInfo
from sparkwatch.plan.codec import identity_from_dict, plan_to_dict
from sparkwatch.plan.model import QueryPlan, Source
from sparkwatch.plan.trigger import KINDS
from sparkwatch.summary import quoted

PLAN_KIND = "plan"

MAX_KEYS = 64
"""Grouping, deduplication or join keys of one operator (and event-time keys)."""
MAX_WATERMARKS = 16
MODE_CHARS = 32
"""An output mode: append, update, complete."""
_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""An operator kind (``aggregation``...): a label value users filter on, so an identifier."""


@dataclass(frozen=True, slots=True)
class PlanEvent:
    """A plan pushed by a listener, with the app it came from."""

    app: AppInfo
    received_at: float
    plan: QueryPlan

    @property
    def query_id(self) -> str:
        return self.plan.query_id

    @property
    def run_id(self) -> str:
        return self.plan.run_id


def is_plan_item(item: Any) -> bool:
    """Whether a wire entry is a plan (anything else is read as an event)."""
    return isinstance(item, Mapping) and item.get("kind") == PLAN_KIND


def plan_to_wire(app: AppInfo, plan: QueryPlan, received_at: float) -> dict[str, Any]:
    """The wire entry of ``plan``, fitted to the contract's caps (the listener's side: Spark's
    names made to fit, never refused)."""
    payload = conform(plan_to_dict(plan))
    payload["operators"] = payload["operators"][: LIMITS.operators]
    for op in payload["operators"]:
        for key in ("operator", "node", "watermark_column"):
            if isinstance(op.get(key), str):
                op[key] = fit(op[key], LIMITS.name_chars)
        for key in ("state_store_provider", "checkpoint_location"):
            if isinstance(op.get(key), str):
                op[key] = fit(op[key], LIMITS.text_chars)
        for key in ("keys", "event_time_keys"):
            op[key] = [fit(k, LIMITS.name_chars) for k in op.get(key) or []][:MAX_KEYS]
        op["watermarks"] = [
            {**w, "column": fit(str(w.get("column", "")), LIMITS.name_chars)}
            for w in op.get("watermarks") or []
        ][:MAX_WATERMARKS]
    if isinstance(payload.get("note"), str):
        payload["note"] = fit(payload["note"], LIMITS.text_chars)
    payload["settings"] = {
        fit(k, LIMITS.key_chars): fit(str(v), LIMITS.text_chars)
        for k, v in list((payload.get("settings") or {}).items())[: LIMITS.map_entries]
    }
    return {
        "kind": PLAN_KIND,
        "app": {"name": app.name, "id": app.id, "spark_version": app.spark_version},
        "received_at": received_at,
        "payload": payload,
    }


def plan_event_to_dict(event: PlanEvent) -> dict[str, Any]:
    """The wire entry of a validated plan (the collector's spool), as :func:`plan_from_wire`
    reads it back."""
    app = event.app
    return {
        "kind": PLAN_KIND,
        "app": {"name": app.name, "id": app.id, "spark_version": app.spark_version},
        "received_at": event.received_at,
        "payload": plan_to_dict(event.plan),
    }


def plan_from_wire(item: Any) -> PlanEvent:
    """A wire plan entry, validated; raises :class:`ContractViolation` naming the field."""
    if not isinstance(item, Mapping):
        raise fail("event", f"expected a JSON object, got {type(item).__name__}")
    # Every value first (duplicate keys, nesting, NUL, surrogates, integer range, floats).
    check_tree(item, "event")
    app = _obj(item.get("app"), "event.app")
    received_at = item.get("received_at")
    if (isinstance(received_at, bool) or not isinstance(received_at, int | float)
            or not 0 <= received_at <= LATEST_EPOCH):
        raise fail("event.received_at", f"expected epoch seconds, got {quoted(received_at)}")
    info = AppInfo(
        name=_text(app, "name", "event.app", LIMITS.name_chars, required=True) or "",
        id=_text(app, "id", "event.app", LIMITS.id_chars, required=True) or "",
        spark_version=_text(app, "spark_version", "event.app", LIMITS.name_chars) or "",
    )
    return PlanEvent(info, float(received_at), _plan(_obj(item.get("payload"), "plan")))


def _plan(data: Mapping[str, Any]) -> QueryPlan:
    where = "plan"
    source = data.get("source", Source.PLAN.value)
    if source not in {s.value for s in Source}:
        raise fail(child(where, "source"), f"expected plan or progress, got {quoted(source)}")
    read_at = data.get("read_at", 0.0)
    if (isinstance(read_at, bool) or not isinstance(read_at, int | float)
            or not math.isfinite(read_at) or not 0 <= read_at <= LATEST_EPOCH):
        raise fail(child(where, "read_at"), f"expected epoch seconds, got {quoted(read_at)}")
    operators = _list(data, "operators", where, LIMITS.operators)
    settings = _obj(data.get("settings") or {}, child(where, "settings"))
    if len(settings) > LIMITS.map_entries:
        raise fail(child(where, "settings"),
                   f"{len(settings)} entries is over the limit of {LIMITS.map_entries}")
    for key, value in settings.items():
        if not isinstance(value, str):
            raise fail(child(child(where, "settings"), key), "expected a string")
        check_text(value, child(child(where, "settings"), key), LIMITS.text_chars)
    plan = QueryPlan(
        query_id=check_id(_text(data, "query_id", where, LIMITS.id_chars, required=True) or "",
                          child(where, "query_id")),
        run_id=check_id(_text(data, "run_id", where, LIMITS.id_chars, required=True) or "",
                        child(where, "run_id")),
        source=Source(source),
        operators=tuple(_operator(op, child(child(where, "operators"), i), i)
                        for i, op in enumerate(operators)),
        batch_id=_int(data, "batch_id", where),
        read_at=float(read_at),
        note=_text(data, "note", where, LIMITS.text_chars),
        settings=dict(settings),
        trigger=_trigger_kind(data, where),
        trigger_interval_ms=_int(data, "trigger_interval_ms", where),
    )
    indexes = [op.index for op in plan.operators]
    if len(set(indexes)) != len(indexes):
        raise fail(child(where, "operators"), "two operators have the same index")
    return plan


def _trigger_kind(data: Mapping[str, Any], where: str) -> str | None:
    kind = _text(data, "trigger", where, 64)
    if kind is not None and kind not in KINDS:
        raise fail(child(where, "trigger"), f"expected one of {', '.join(KINDS)}, got "
                   f"{quoted(kind)}")
    return kind


def _operator(data: Any, where: str, position: int) -> Any:
    op = _obj(data, where)
    index = _int(op, "index", where, required=True)
    if index is None or index >= LIMITS.operators:
        raise fail(child(where, "index"), f"{quoted(index)} is out of range "
                   f"(0..{LIMITS.operators - 1})")
    kind = _text(op, "kind", where, 64, required=True) or ""
    if not _KIND.fullmatch(kind):
        raise fail(child(where, "kind"), "expected an identifier of lowercase letters, digits "
                   "and _ (aggregation, dedupe, ...)")
    _text(op, "operator", where, LIMITS.name_chars, required=True)
    _text(op, "node", where, LIMITS.name_chars)
    # Spark's Ints, stored in INTEGER columns (PostgreSQL refused 2^31 after the 200)
    _int(op, "operator_id", where, maximum=INT32_MAX)
    _int(op, "num_state_stores", where, maximum=INT32_MAX)
    _text(op, "output_mode", where, MODE_CHARS)
    _text(op, "state_store_provider", where, LIMITS.text_chars)
    _text(op, "checkpoint_location", where, LIMITS.text_chars)
    for key in ("keys", "event_time_keys"):
        for i, name in enumerate(_list(op, key, where, MAX_KEYS)):
            if not isinstance(name, str):
                raise fail(child(child(where, key), i), "expected a string")
            check_text(name, child(child(where, key), i), LIMITS.name_chars)
    for i, mark in enumerate(_list(op, "watermarks", where, MAX_WATERMARKS)):
        here = child(child(where, "watermarks"), i)
        mark = _obj(mark, here)
        _text(mark, "column", here, LIMITS.name_chars, required=True)
        _int(mark, "delay_ms", here)
    details = _obj(op.get("details") or {}, child(where, "details"))
    if len(details) > LIMITS.map_entries:
        raise fail(child(where, "details"),
                   f"{len(details)} entries is over the limit of {LIMITS.map_entries}")
    try:
        return identity_from_dict(op)
    except (KeyError, TypeError, ValueError) as exc:  # checked above: a bug, still a 4xx
        raise fail(where, f"cannot be read ({type(exc).__name__})") from None


def plan_schema() -> dict[str, Any]:
    """A plan entry as JSON Schema (the collector's OpenAPI), from the caps the code enforces."""
    text = {"type": "string", "maxLength": LIMITS.name_chars}
    optional = {"type": "string", "maxLength": LIMITS.text_chars, "nullable": True}
    count = {"type": "integer", "minimum": 0, "nullable": True}
    names = {"type": "array", "maxItems": MAX_KEYS, "items": text}
    operator = {"type": "object", "required": ["index", "operator", "kind"], "properties": {
        "index": {"type": "integer", "minimum": 0, "maximum": LIMITS.operators - 1},
        "operator": text, "kind": {"type": "string", "pattern": _KIND.pattern},
        "node": {**text, "nullable": True}, "operator_id": count, "keys": names,
        "event_time_keys": names,
        "output_mode": {"type": "string", "maxLength": MODE_CHARS, "nullable": True},
        "watermarks": {"type": "array", "maxItems": MAX_WATERMARKS, "items": {
            "type": "object", "required": ["column"],
            "properties": {"column": text, "delay_ms": count}}},
        "num_state_stores": count, "state_store_provider": optional,
        "checkpoint_location": optional,
        "details": {"type": "object", "maxProperties": LIMITS.map_entries},
    }}
    return {
        "type": "object", "required": ["kind", "app", "received_at", "payload"],
        "description": "A run's plan: what each state operator is in the executed plan (sent "
                       "by the listener after the run's first progress; refused like an event, "
                       "naming the field).",
        "properties": {
            "kind": {"type": "string", "enum": [PLAN_KIND]},
            "app": {"type": "object", "required": ["name", "id"]},
            "received_at": {"type": "number", "minimum": 0, "maximum": LATEST_EPOCH},
            "payload": {"type": "object", "required": ["query_id", "run_id"], "properties": {
                "query_id": {"type": "string", "maxLength": LIMITS.id_chars},
                "run_id": {"type": "string", "maxLength": LIMITS.id_chars},
                "source": {"type": "string", "enum": [s.value for s in Source]},
                "batch_id": count, "read_at": {"type": "number", "minimum": 0},
                "note": optional,
                "trigger": {"type": "string", "enum": list(KINDS), "nullable": True},
                "trigger_interval_ms": count,
                "settings": {"type": "object", "maxProperties": LIMITS.map_entries},
                "operators": {"type": "array", "maxItems": LIMITS.operators,
                              "items": operator},
            }},
        },
    }


def _obj(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise fail(where, f"expected a JSON object, got {_type(value)}")
    return value


def _list(data: Mapping[str, Any], key: str, where: str, cap: int) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(child(where, key), f"expected a JSON array, got {_type(value)}")
    if len(value) > cap:
        raise fail(child(where, key), f"{len(value)} entries is over the limit of {cap}")
    return value


def _text(data: Mapping[str, Any], key: str, where: str, cap: int,
          required: bool = False) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise fail(child(where, key), "required")
        return None
    if not isinstance(value, str):
        raise fail(child(where, key), f"expected a string, got {_type(value)}")
    if required and not value:
        raise fail(child(where, key), "must not be empty")
    return check_text(value, child(where, key), cap)


def _int(data: Mapping[str, Any], key: str, where: str, required: bool = False,
         maximum: int | None = None) -> int | None:
    value = data.get(key)
    if value is None:
        if required:
            raise fail(child(where, key), "required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(child(where, key), f"expected an integer, got {_type(value)}")
    if maximum is not None and value > maximum:
        raise fail(child(where, key), f"{quoted(value)} is out of range (0..{maximum})")
    return check_count(value, child(where, key))


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


__all__ = ["PLAN_KIND", "ContractViolation", "PlanEvent", "is_plan_item", "plan_event_to_dict",
           "plan_from_wire", "plan_to_wire"]
