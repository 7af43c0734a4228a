"""Facts about one state-writing node of a parsed tree, read from its arguments and subtree.

Every writer prints its state info (``opId``, ``numPartitions`` = number of state stores, the
state checkpoint) and, first among its bracketed lists, its keys; watermarks come from the
``EventTimeWatermark`` nodes below it. Argument layouts checked on Spark 3.5.9 and 4.3.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sparkwatch.plan.kinds import READER_NODES, WRITER_NODES
from sparkwatch.plan.model import Watermark
from sparkwatch.plan.text import (
    StateInfo,
    attribute,
    bracket_items,
    interval_ms,
    split_top_level,
    state_info,
)
from sparkwatch.plan.tree import Node, children, subtree

OUTPUT_MODES = {"Append": "append", "Update": "update", "Complete": "complete"}
TIMEOUTS = ("NoTimeout", "ProcessingTimeTimeout", "EventTimeTimeout")
TIME_MODES = ("NoTime", "ProcessingTime", "EventTime")


@dataclass(frozen=True, slots=True)
class WriterFacts:
    node: str
    state: StateInfo | None
    keys: tuple[str, ...]
    event_time_keys: tuple[str, ...]
    output_mode: str | None
    watermarks: tuple[Watermark, ...]
    details: dict[str, Any] = field(default_factory=dict)


def is_writer(node: Node) -> bool:
    if node.name in WRITER_NODES:
        return True
    # A state writer a newer Spark added: it still prints its state info.
    return node.name not in READER_NODES and state_info(node.args) is not None


def writer_positions(nodes: list[Node]) -> list[int]:
    return [i for i, node in enumerate(nodes) if is_writer(node)]


def writer_facts(nodes: list[Node], position: int) -> WriterFacts:
    node = nodes[position]
    items = split_top_level(node.args)
    below = subtree(nodes, position)
    keys = _keys(items)
    if node.name == "SessionWindowStateStoreSave":
        keys += _session_column(items)
    facts = WriterFacts(
        node=node.name,
        state=state_info(node.args),
        keys=tuple(a.name for a in keys),
        event_time_keys=tuple(a.name for a in keys if _is_event_time(a, below, node)),
        output_mode=next((OUTPUT_MODES[i] for i in items if i in OUTPUT_MODES), None),
        watermarks=watermarks(below),
    )
    facts.details.update(_details(node, items, nodes, position))
    return facts


def _keys(items: list[str]) -> list[Any]:
    for item in items:
        elements = bracket_items(item)
        if elements is not None:
            return [attribute(e) for e in elements if e]
    return []


def _session_column(items: list[str]) -> list[Any]:
    # "[key#125], session_window#133: struct<start: timestamp, end: timestamp>, state info ..."
    if len(items) > 1 and ": struct<" in items[1]:
        return [attribute(items[1].split(":", 1)[0])]
    return []


def _is_event_time(attr: Any, below: list[Node], node: Node) -> bool:
    if attr.delay_ms is not None:
        return True
    # The session window column prints without its watermark mark in the writer itself.
    if attr.expr_id is None:
        return False
    marked = f"{attr.name}#{attr.expr_id}-T"
    return any(marked in n.args for n in below) or marked in node.args


def watermarks(below: list[Node]) -> tuple[Watermark, ...]:
    """``EventTimeWatermark [uuid, ]ts#0: timestamp, 5 seconds`` nodes, in plan order."""
    out = []
    for node in below:
        if node.name != "EventTimeWatermark":
            continue
        items = split_top_level(node.args)
        typed = next((i for i in items if ": " in i), None)
        if typed is None:
            continue
        column = attribute(typed.split(": ", 1)[0])
        delay = interval_ms(items[-1]) if len(items) > 1 else None
        out.append(Watermark(column.name, delay if delay is not None else column.delay_ms))
    return tuple(out)


def _details(node: Node, items: list[str], nodes: list[Node], position: int) -> dict[str, Any]:
    if node.name == "StreamingSymmetricHashJoin":
        return _join_details(items, nodes, position)
    if node.name == "StreamingGlobalLimit" and items and items[0].isdigit():
        return {"limit": int(items[0])}
    out: dict[str, Any] = {}
    timeout = next((i for i in items if i in TIMEOUTS), None)
    if timeout:
        out["timeout"] = timeout
    time_mode = next((i for i in items if i in TIME_MODES), None)
    if time_mode:
        out["time_mode"] = time_mode
    return out


def _join_details(items: list[str], nodes: list[Node], position: int) -> dict[str, Any]:
    right = bracket_items(items[1]) if len(items) > 1 else None
    cleanup = next((i for i in items if i.startswith("state cleanup")), "")
    condition = next((i for i in items if i.startswith("condition = ")), "")
    sides = children(nodes, position)
    return {
        "join_type": items[2] if len(items) > 2 else None,
        "right_keys": [attribute(k).name for k in right or []],
        "state_cleanup": {side: _cleanup(cleanup, side) for side in ("left", "right")},
        "has_condition": "both = null" not in condition and bool(condition),
        "side_watermarks": {
            side: [w.column for w in watermarks(tree)]
            for side, tree in zip(("left", "right"), sides, strict=False)
        },
    }


def _cleanup(text: str, side: str) -> str | None:
    """How a join side's state is evicted: by key, by value, or never (None)."""
    if f"{side} key predicate" in text:
        return "key"
    if f"{side} value predicate" in text:
        return "value"
    return None
