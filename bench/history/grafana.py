"""The History dashboard's SQL as Grafana's PostgreSQL datasource sends it.

Read from the committed dashboard JSON (what users import), every panel target and every query
variable; Grafana's macros and template variables substituted as Grafana 11 does: time macros in
RFC 3339 UTC, multi-value variables as quoted, comma-separated lists, and *All* (the variables
have no custom all value) as the list of every value the variable's own query returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sparkwatch.dashboards.docs import panels_in_order, target_text
from sparkwatch.dashboards.files import PACKAGE_DIR

BOARD = PACKAGE_DIR / "generated" / "grafana" / "sparkwatch-history.json"
# Grafana's maxDataPoints for a full-width panel is about its width in pixels.
MAX_DATA_POINTS = 1_000
# Grafana rounds $__interval to one of these (seconds), the first not below range / points.
NICE_INTERVALS = (1, 5, 10, 15, 30, 60, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
VARIABLE = re.compile(r"\$(\w+)\b|\$\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class Target:
    title: str
    sql: str


@dataclass(frozen=True, slots=True)
class Board:
    panels: list[Target]
    variables: list[Target]
    """Query variables in declaration (dependency) order; ``title`` is the variable's name."""


def load(path: Path = BOARD) -> Board:
    board = json.loads(path.read_text())
    panels = [
        Target(panel["title"], text)
        for _, panel in panels_in_order(board)
        for target in panel.get("targets", [])
        for language, text in [target_text(target)]
        if language == "sql"
    ]
    variables = [Target(v["name"], str(v["query"])) for v in board["templating"]["list"]
                 if v.get("type") == "query"]
    return Board(panels, variables)


def _rfc3339(t: datetime) -> str:
    return "'" + t.isoformat().replace("+00:00", "Z") + "'"


def interval_seconds(start: datetime, end: datetime) -> int:
    wanted = (end - start).total_seconds() / MAX_DATA_POINTS
    return next((s for s in NICE_INTERVALS if s >= wanted), NICE_INTERVALS[-1])


def _seconds(text: str, default: int) -> int:
    """``'5m'``/``5m``/``$__interval`` (already a number of seconds here) as seconds."""
    text = text.strip().strip("'")
    match = re.fullmatch(r"(\d+)([smhd]?)", text)
    if not match:
        return default
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def _time_macros(sql: str, start: datetime, end: datetime) -> str:
    since, until, step = _rfc3339(start), _rfc3339(end), interval_seconds(start, end)

    def group(match: re.Match[str], alias: bool) -> str:
        column, _, every = match.group(1).partition(",")
        seconds = _seconds(every.split(",")[0], step) if every else step
        out = f"floor(extract(epoch from {column.strip()})/{seconds})*{seconds}"
        return out + ' AS "time"' if alias else out

    sql = re.sub(r"\$__timeGroupAlias\(([^)]*)\)", lambda m: group(m, True), sql)
    sql = re.sub(r"\$__timeGroup\(([^)]*)\)", lambda m: group(m, False), sql)
    sql = re.sub(r"\$__timeFilter\(([^)]*)\)", rf"\1 BETWEEN {since} AND {until}", sql)
    sql = sql.replace("$__timeFrom()", since).replace("$__timeTo()", until)
    sql = sql.replace("$__interval_ms", str(step * 1000)).replace("$__interval", f"{step}s")
    return sql


def render(sql: str, variables: Mapping[str, Sequence[str]], start: datetime,
           end: datetime) -> str:
    """``sql`` with Grafana's macros and variables filled in; an unknown one is an error (the
    measured query would not be what Grafana runs)."""
    sql = _time_macros(sql, start, end)

    def values(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise KeyError(f"no value for ${name} in: {sql}")
        return ", ".join("'" + v.replace("'", "''") + "'" for v in variables[name]) or "NULL"

    return VARIABLE.sub(values, sql)


@dataclass(frozen=True, slots=True)
class TimeRange:
    label: str
    span: timedelta

    def bounds(self, end: datetime) -> tuple[datetime, datetime]:
        return end - self.span, end


RANGES = (
    TimeRange("6h", timedelta(hours=6)),
    TimeRange("7d", timedelta(days=7)),
    TimeRange("30d", timedelta(days=30)),
)
