"""What every sparkwatch dashboard shares: uid, tags, links to the others, refresh, ids."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as dm

from sparkwatch.dashboards.variables import prometheus_variables

TAG = "sparkwatch"


def new_dashboard(uid: str, title: str, description: str, variables: Sequence[Any]) -> db.Dashboard:
    links = (
        db.DashboardLink("sparkwatch")
        .type(dm.DashboardLinkType.DASHBOARDS)
        .tags([TAG])
        .as_dropdown(True)
        .include_vars(True)
        .keep_time(True)
    )
    board = (
        db.Dashboard(f"sparkwatch / {title}")
        .uid(uid)
        .description(description)
        .tags([TAG, "spark", "structured-streaming"])
        .editable()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("browser")
        .link(links)
    )
    for variable in variables:
        board = board.with_variable(variable)
    return board


def assemble(board: db.Dashboard, sections: Sequence[tuple[str, Sequence[Any]]]) -> dict[str, Any]:
    """Rows of panels, then :func:`finish`."""
    for title, panels in sections:
        board = board.with_row(db.Row(title))
        for panel in panels:
            board = board.with_panel(panel)
    return finish(board)


def prometheus_board(uid: str, title: str, description: str,
                     sections: Sequence[tuple[str, Sequence[Any]]]) -> dict[str, Any]:
    """A dashboard on the Prometheus metrics (its data source, tenant, app and query variables):
    ``sections`` as rows of panels."""
    return assemble(new_dashboard(uid, title, description, prometheus_variables()), sections)


def finish(board: db.Dashboard) -> dict[str, Any]:
    """The dashboard as JSON data, panels numbered in layout order (stable ids for links)."""
    model = board.build()
    for number, panel in enumerate(model.panels or [], start=1):
        panel.id_val = number
    data: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    return data


def to_text(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
