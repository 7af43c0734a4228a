"""Panel builders with sparkwatch's defaults, over grafana-foundation-sdk.

Every panel gets a title, a description (what the user sees, what to do) and targets whose
``refId`` follow their order. Dashboards are laid out by the SDK from ``width``/``height``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grafana_foundation_sdk.builders import bargauge, heatmap, prometheus, stat, table, timeseries
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import heatmap as heatmap_model
from grafana_foundation_sdk.models import prometheus as prometheus_model

PROMETHEUS = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
Target = cogbuilder.Builder[cogvariants.Dataquery]


def prom(
    expr: str, legend: str = "", *, instant: bool = False, fmt: str | None = None
) -> prometheus.Dataquery:
    """A PromQL target; ``instant`` for tables and bars (current value), ``fmt`` table/heatmap."""
    query = prometheus.Dataquery().expr(expr)
    if legend:
        query = query.legend_format(legend)
    query = query.instant() if instant else query.range()
    if fmt:
        query = query.format(prometheus_model.PromQueryFormat(fmt))
    return query


def _common(panel: Any, title: str, description: str, targets: Sequence[Target]) -> Any:
    panel = panel.title(title).description(description)
    for i, target in enumerate(targets):
        panel = panel.with_target(target.ref_id(chr(ord("A") + i)))  # type: ignore[attr-defined]
    return panel


def _placed(panel: Any, unit: str, width: int, height: int,
            datasource: dm.DataSourceRef = PROMETHEUS) -> Any:
    """``panel`` on ``datasource``, values in ``unit``, ``width`` of 24 columns by ``height``."""
    return panel.datasource(datasource).unit(unit).span(width).height(height)


def threshold_steps(limit: float | None) -> db.ThresholdsConfig:
    steps = [dm.Threshold(value=None, color="green")]
    if limit is not None:
        steps.append(dm.Threshold(value=float(limit), color="red"))
    return db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps)


def graph(
    title: str,
    description: str,
    targets: Sequence[Target],
    unit: str = "short",
    *,
    limit: float | None = None,
    stack: bool = False,
    bars: bool = False,
    width: int = 12,
    height: int = 8,
    datasource: dm.DataSourceRef = PROMETHEUS,
) -> timeseries.Panel:
    """A time series; ``limit`` draws the alert threshold as a red line; ``bars`` for daily
    values."""
    legend = (
        cb.VizLegendOptions()
        .display_mode(cm.LegendDisplayMode.TABLE)
        .placement(cm.LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["lastNotNull", "max"])
    )
    panel = (
        _placed(timeseries.Panel(), unit, width, height, datasource)
        .legend(legend)
        .fill_opacity(10)
        .tooltip(
            cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)
        )
    )
    if bars:
        panel = panel.draw_style(cm.GraphDrawStyle.BARS).fill_opacity(60)
    if stack:
        panel = panel.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL)).fill_opacity(40)
    if limit is not None:
        panel = panel.thresholds(threshold_steps(limit)).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphThresholdsStyleMode.LINE)
        )
    return _common(panel, title, description, targets)


def single(
    title: str,
    description: str,
    expr: str,
    unit: str = "short",
    *,
    limit: float | None = None,
    width: int = 6,
    height: int = 4,
) -> stat.Panel:
    """One current number (instant query), red from ``limit`` on."""
    panel = (
        _placed(stat.Panel(), unit, width, height)
        .graph_mode(cm.BigValueGraphMode.NONE)
        .color_mode(cm.BigValueColorMode.VALUE)
        .thresholds(threshold_steps(limit))
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    return _common(panel, title, description, [prom(expr, instant=True)])


def bars(
    title: str,
    description: str,
    targets: Sequence[Target],
    unit: str = "short",
    *,
    width: int = 12,
    height: int = 8,
) -> bargauge.Panel:
    """Current values as horizontal bars (instant targets)."""
    panel = (
        _placed(bargauge.Panel(), unit, width, height)
        .orientation(cm.VizOrientation.HORIZONTAL)
        .display_mode(cm.BarGaugeDisplayMode.GRADIENT)
        .reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    return _common(panel, title, description, targets)


def heat(title: str, description: str, target: Target, *, width: int = 12) -> heatmap.Panel:
    """Histogram buckets over time (``target`` in heatmap format)."""
    panel = (
        heatmap.Panel()
        .datasource(PROMETHEUS)
        .span(width)
        .height(8)
        .calculate(False)
        .y_axis(heatmap.YAxisConfig().unit("s"))
        .color(
            heatmap.HeatmapColorOptions()
            .mode(heatmap_model.HeatmapColorMode.SCHEME)
            .scheme("Oranges")
            .steps(64)
        )
        .cell_values(heatmap.CellValues().unit("short"))
    )
    return _common(panel, title, description, [target])


def grid(
    title: str,
    description: str,
    targets: Sequence[Target],
    *,
    datasource: dm.DataSourceRef = PROMETHEUS,
    width: int = 24,
    height: int = 8,
) -> table.Panel:
    """A table; transformations and overrides are added by the caller."""
    panel = table.Panel().datasource(datasource).span(width).height(height).filterable(True)
    return _common(panel, title, description, targets)
