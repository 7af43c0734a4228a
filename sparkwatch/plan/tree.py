"""Spark's ``treeString`` back into nodes: name, arguments and depth, in pre-order.

Pre-order is the order of ``executedPlan.collect``, which is how Spark builds ``stateOperators``:
the n-th state-writing node of the tree string is the n-th entry of the progress.

Each line is ``<ancestor columns><marker><node>``: one 3-character column per ancestor level
(``"   "`` or ``":  "``) and a marker ``"+- "`` (last child) or ``":- "``; the root has neither.
A node whose string spans several lines continues on lines without that shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"^((?:   |:  )*)([+:]- )(.*)$")
# "*(3) HashAggregate(...)": whole-stage codegen id; "!Node": Spark marks an unresolved node.
_DECORATION = re.compile(r"^(?:\*\(\d+\)\s*)?!?")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Node:
    depth: int
    name: str
    args: str
    """Everything after the name, e.g. ``[window#9-T5000ms, key#1], state info [...], Append``."""


def parse_tree(text: str) -> list[Node]:
    """The nodes of a tree string in pre-order (the order they are printed)."""
    raw: list[tuple[int, str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _LINE.match(line)
        if match:
            raw.append((len(match.group(1)) // 3 + 1, match.group(3)))
        elif not raw:
            raw.append((0, line))
        else:  # a continuation of the previous node's multi-line string
            depth, body = raw[-1]
            raw[-1] = (depth, f"{body} {line.strip()}")
    return [_node(depth, body) for depth, body in raw]


def _node(depth: int, body: str) -> Node:
    text = _DECORATION.sub("", body.strip(), count=1)
    name = _NAME.match(text)
    if name is None:
        return Node(depth, "", text)
    return Node(depth, name.group(0), text[name.end() :].strip())


def subtree(nodes: list[Node], position: int) -> list[Node]:
    """The descendants of ``nodes[position]`` (everything below it until a shallower node)."""
    depth = nodes[position].depth
    out = []
    for node in nodes[position + 1 :]:
        if node.depth <= depth:
            break
        out.append(node)
    return out


def children(nodes: list[Node], position: int) -> list[list[Node]]:
    """The subtrees of the direct children of ``nodes[position]``, each with its root first."""
    below = subtree(nodes, position)
    if not below:
        return []
    top = below[0].depth
    out: list[list[Node]] = []
    for node in below:
        if node.depth == top:
            out.append([])
        out[-1].append(node)
    return out
