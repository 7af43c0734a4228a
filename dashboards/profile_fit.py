"""Dashboards cut to the metric profile: a query reading a family /metrics does not export would
be a panel without data, so such targets are left out, then panels without targets, then rows
without panels. Panel ids stay as :func:`skeleton.finish` numbered them (links keep working)."""

from __future__ import annotations

from typing import Any

from sparkwatch.dashboards.config import Config


def fit(board: dict[str, Any], config: Config) -> dict[str, Any]:
    """``board`` (dashboard JSON data) with what the profile cannot fill taken out."""
    panels = [q for q in (_panel(p, config) for p in board.get("panels", [])) if q is not None]
    return {**board, "panels": _without_empty_rows(panels)}


def _without_empty_rows(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows keep their panels nested (collapsed) or followed by them (expanded)."""
    out = []
    for i, panel in enumerate(panels):
        if panel.get("type") == "row" and not panel.get("panels"):
            following = panels[i + 1] if i + 1 < len(panels) else None
            if following is None or following.get("type") == "row":
                continue
        out.append(panel)
    return out


def _panel(panel: dict[str, Any], config: Config) -> dict[str, Any] | None:
    if panel.get("type") == "row":
        nested = [q for q in (_panel(p, config) for p in panel.get("panels", [])) if q is not None]
        if panel.get("panels") and not nested:
            return None
        return {**panel, "panels": nested}
    targets = panel.get("targets")
    if not targets:
        return panel  # text, or a panel whose data is not a query
    kept = [t for t in targets if config.exports(str(t.get("expr", "")))]
    return {**panel, "targets": kept} if kept else None
