"""The config's ``selector`` on the dashboards: every raw series a panel or a variable reads is
narrowed by it, as the rules' series are (``job="spark-drivers"`` then shows only what that job
scrapes, on every panel, not only on those that read recording rules or ``ALERTS``).

Recording-rule series (``sparkwatch_query:...``, names with a colon) and ``ALERTS`` are left as
they are: the rules built with the same selector already read only its series, and their output
keeps none of the labels a selector may name (``job``, ``instance``, ...). An empty selector
leaves the boards byte for byte as built.
"""

from __future__ import annotations

import re
from typing import Any

_RAW_SELECTOR = re.compile(r'(?<![\w:"])(?!ALERTS)([A-Za-z_][A-Za-z0-9_]*)\{(\s*\})?')
"""A raw series' selector: a name without a colon, right before its braces (a function name is
followed by ``(``, a label name by a matcher or a comma). Group 2: braces with nothing inside."""

_BARE_LABEL_VALUES = re.compile(r"label_values\(\s*(?!ALERTS)([A-Za-z_][A-Za-z0-9_]*)\s*,")
"""A variable's ``label_values(name, label)`` whose series has no braces yet."""

PROMQL_KEYS = ("expr", "query", "definition")
"""Where PromQL stands: a Prometheus target's ``expr``, a variable's ``query`` and
``definition``. The History boards' SQL has no ``name{`` and is left alone by the patterns."""


def scoped(board: dict[str, Any], selector: str) -> dict[str, Any]:
    """``board`` (dashboard JSON data) with ``selector``'s matchers first in every raw series'
    selector; ``board`` itself when the selector is empty."""
    if not selector:
        return board
    return _walk(board, selector)


def scope_promql(promql: str, selector: str) -> str:
    """``promql`` with ``selector`` in every raw series' braces (added where it has none)."""
    promql = _RAW_SELECTOR.sub(
        lambda m: f"{m[1]}{{{selector}}}" if m[2] is not None else f"{m[1]}{{{selector}, ",
        promql,
    )
    return _BARE_LABEL_VALUES.sub(lambda m: f"label_values({m[1]}{{{selector}}},", promql)


def _walk(node: Any, selector: str) -> Any:
    if isinstance(node, dict):
        return {key: scope_promql(value, selector)
                if key in PROMQL_KEYS and isinstance(value, str) else _walk(value, selector)
                for key, value in node.items()}
    if isinstance(node, list):
        return [_walk(item, selector) for item in node]
    return node
