"""Reading the pieces of a plan node's arguments: lists, attributes, state info, intervals."""

from __future__ import annotations

import re
from dataclasses import dataclass

_CLOSE = {"(": ")", "[": "]", "{": "}"}
# "ts#0-T5000ms": name, expression id, type suffix (L for long...), watermark delay in ms.
_ATTRIBUTE = re.compile(r"^(?P<name>.+?)#(?P<id>\d+)[A-Za-z]*(?:-T(?P<delay>\d+)ms)?$")
_STATE_INFO = re.compile(
    r"state info \[\s*checkpoint = (?P<checkpoint>.*?), runId = (?P<run_id>[^,]*), "
    r"opId = (?P<op_id>\d+), ver = (?P<version>\d+), numPartitions = (?P<partitions>\d+)\s*\]"
)
_INTERVAL_PART = re.compile(
    r"(-?\d+(?:\.\d+)?)\s*(years?|months?|weeks?|days?|hours?|minutes?|seconds?|"
    r"milliseconds?|microseconds?)\b",
    re.IGNORECASE,
)
_UNIT_MS = {
    "year": 12 * 31 * 86_400_000,  # Spark's EventTimeWatermark counts a month as 31 days
    "month": 31 * 86_400_000,
    "week": 7 * 86_400_000,
    "day": 86_400_000,
    "hour": 3_600_000,
    "minute": 60_000,
    "second": 1_000,
    "millisecond": 1,
    "microsecond": 0.001,
}


def split_top_level(text: str) -> list[str]:
    """Split at commas outside (), [], {} and, at the top level, outside ``<...>`` types
    (``struct<start: timestamp, end: timestamp>``); comparison signs inside brackets are safe."""
    items: list[str] = []
    depth: list[str] = []
    current: list[str] = []
    angle = 0
    for ch in text:
        if ch in _CLOSE:
            depth.append(_CLOSE[ch])
        elif depth and ch == depth[-1]:
            depth.pop()
        elif not depth and ch == "<":
            angle += 1
        elif not depth and ch == ">" and angle:
            angle -= 1
        elif ch == "," and not depth and not angle:
            items.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    tail = "".join(current).strip()
    if tail:
        items.append(tail)
    return items


def bracket_items(item: str) -> list[str] | None:
    """``[a#1, b#2]`` to its elements; None when ``item`` is not a bracketed list."""
    item = item.strip()
    if not (item.startswith("[") and item.endswith("]")):
        return None
    return split_top_level(item[1:-1])


@dataclass(frozen=True, slots=True)
class Attribute:
    name: str
    expr_id: int | None
    delay_ms: int | None
    """Set when the attribute carries watermark metadata (Spark prints ``-T<ms>ms``)."""


def attribute(text: str) -> Attribute:
    """An attribute as Spark prints it; anything else keeps its text as the name."""
    text = text.strip()
    match = _ATTRIBUTE.match(text)
    if match is None:
        return Attribute(text, None, None)
    delay = match.group("delay")
    return Attribute(match.group("name"), int(match.group("id")), int(delay) if delay else None)


@dataclass(frozen=True, slots=True)
class StateInfo:
    checkpoint: str
    run_id: str
    operator_id: int
    version: int
    num_partitions: int


def state_info(args: str) -> StateInfo | None:
    match = _STATE_INFO.search(args)
    if match is None:
        return None
    return StateInfo(
        checkpoint=match.group("checkpoint").strip(),
        run_id=match.group("run_id").strip(),
        operator_id=int(match.group("op_id")),
        version=int(match.group("version")),
        num_partitions=int(match.group("partitions")),
    )


def interval_ms(text: str) -> int | None:
    """A CalendarInterval as Spark prints it (``5 seconds``, ``1 hours 30 minutes``) in ms."""
    parts = _INTERVAL_PART.findall(text)
    if not parts:
        return None
    total = 0.0
    for amount, unit in parts:
        total += float(amount) * _UNIT_MS[unit.lower().rstrip("s")]
    return int(round(total))
