"""Table plumbing: joining instant queries into one row per query, naming and styling columns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import table
from grafana_foundation_sdk.models import dashboard as dm

from sparkwatch.dashboards.recording import STATUS_NAMES

STATUS_COLORS = {
    "failed": "red",
    "stalled": "orange",
    "alerting": "yellow",
    "running": "green",
    "idle": "blue",
    "terminated": "text",
}


def join_columns(
    panel: table.Panel, columns: Sequence[str], hidden: Sequence[str] = ("Time",)
) -> table.Panel:
    """Merge instant table targets A, B, ... into rows; ``Value #A`` becomes ``columns[0]``..."""
    rename = {f"Value #{chr(ord('A') + i)}": title for i, title in enumerate(columns)}
    organize = {
        "excludeByName": {name: True for name in hidden},
        "renameByName": rename,
        "indexByName": {},
    }
    return panel.with_transformation(
        dm.DataTransformerConfig(id_val="merge", options={})
    ).with_transformation(dm.DataTransformerConfig(id_val="organize", options=organize))


def column_units(panel: table.Panel, units: Mapping[str, str]) -> table.Panel:
    for column, unit in units.items():
        panel = panel.override_by_name(column, [dm.DynamicConfigValue(id_val="unit", value=unit)])
    return panel


def status_column(panel: table.Panel, column: str) -> table.Panel:
    """Status codes shown as words on a coloured cell, sorted problems first."""
    options = {
        str(code): {"text": text, "color": STATUS_COLORS[text], "index": i}
        for i, (code, text) in enumerate(STATUS_NAMES.items())
    }
    mappings: list[Any] = [{"type": "value", "options": options}]
    return panel.override_by_name(
        column,
        [
            dm.DynamicConfigValue(id_val="mappings", value=mappings),
            dm.DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-background"}),
        ],
    ).sort_by([cb.TableSortByFieldState().display_name(column).desc(True)])
