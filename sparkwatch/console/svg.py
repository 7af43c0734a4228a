"""Charts as server-side SVG: a sparkline and a time-series line chart, nothing else.

Why our own: the pages are rendered on the server and served by a Spark driver whose import
budget is the standard library plus prometheus-client and SQLAlchemy; a handful of polylines needs
no library, no build step and no script (so the Content-Security-Policy can forbid inline code).
Every text that reaches the SVG goes through :func:`sparkwatch.console.markup.e`, as the pages'
text does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sparkwatch.console.markup import e

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")

Point = tuple[float, float]
"""(seconds since the epoch, value)"""


@dataclass(frozen=True, slots=True)
class Series:
    label: str
    points: Sequence[Point]


def _finite(points: Sequence[Point]) -> list[Point]:
    return [(t, v) for t, v in points if math.isfinite(t) and math.isfinite(v)]


def _share(low: float, high: float) -> Callable[[float], float]:
    """Where a value stands from ``low`` (0) to ``high`` (1). Halved first: two finite values
    far apart (a rate of 1.7e308 over a 0 floor, or two of opposite signs) would make the span
    itself overflow to infinity, and every point NaN."""
    half_low = low / 2
    half_span = high / 2 - half_low or 0.5
    return lambda v: (v / 2 - half_low) / half_span


def sparkline(values: Sequence[float], width: int = 120, height: int = 24) -> str:
    """A bare line of ``values`` (evenly spaced), or an empty box when there are none."""
    ys = [v for v in values if math.isfinite(v)]
    box = f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}"' \
          ' xmlns="http://www.w3.org/2000/svg" role="img"'
    if not ys:
        return box + ' aria-label="no data"></svg>'
    share = _share(min(ys), max(ys))
    step = (width - 2) / max(len(ys) - 1, 1)
    pts = " ".join(f"{1 + i * step:.1f},{height - 2 - share(v) * (height - 4):.1f}"
                   for i, v in enumerate(ys))
    return (box + f' aria-label="{len(ys)} points, last {fmt_number(ys[-1])}">'
            f'<polyline fill="none" stroke="{PALETTE[0]}" stroke-width="1.5" points="{pts}"/>'
            "</svg>")


def line_chart(title: str, unit: str, series: Sequence[Series], width: int = 560,
               height: int = 180) -> str:
    """A line per series over a shared time axis, with min/max labels and a legend.

    ``unit`` formats the axis labels (``bytes``, ``ms``, ``s``, ``rows/s`` or a count).
    """
    drawn = [Series(s.label, sorted(_finite(s.points))) for s in series]
    drawn = [s for s in drawn if s.points]
    left, right, top, bottom = 78, 8, 8, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [f'<svg class="chart" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" role="img" '
           f'aria-label="{e(title)}"><title>{e(title)}</title>',
           f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" '
           'stroke="#ccc"/>']
    if not drawn:
        out.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h / 2}" text-anchor="middle" '
                   'fill="#888" font-size="12">no data in this range</text></svg>')
        return "".join(out)
    ts = [t for s in drawn for t, _ in s.points]
    vs = [v for s in drawn for _, v in s.points]
    t0, t1 = min(ts), max(ts)
    v0, v1 = min(0.0, min(vs)), max(vs)
    t_span, share = (t1 - t0) or 1.0, _share(v0, v1)

    def x(t: float) -> float:
        return left + (t - t0) / t_span * plot_w

    def y(v: float) -> float:
        return top + plot_h - share(v) * plot_h

    for value in (v0, v0 / 2 + v1 / 2, v1):
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" '
                   f'y2="{y(value):.1f}" stroke="#e4e4e4"/>'
                   f'<text x="{left - 4}" y="{y(value) + 4:.1f}" text-anchor="end" '
                   f'font-size="11" fill="#555">{e(fmt_unit(value, unit))}</text>')
    for t, anchor in ((t0, "start"), (t1, "end")):
        out.append(f'<text x="{x(t):.1f}" y="{height - 6}" text-anchor="{anchor}" '
                   f'font-size="11" fill="#555">{fmt_time(t)}</text>')
    for i, s in enumerate(drawn):
        colour = PALETTE[i % len(PALETTE)]
        # Whole pixels: finer is invisible, and formatting is most of a page's time.
        pts = " ".join(f"{round(x(t))},{round(y(v))}" for t, v in s.points)
        last_t, last_v = s.points[-1]
        label = f"{s.label}: last {fmt_unit(last_v, unit)}"
        out.append(f'<g class="series" data-points="{len(s.points)}">'
                   f'<title>{e(label)}</title>'
                   f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{pts}"/>'
                   f'<circle cx="{x(last_t):.1f}" cy="{y(last_v):.1f}" r="2.5" '
                   f'fill="{colour}"/></g>')
    out.append("</svg>")
    legend = "".join(
        f'<span class="key"><span class="swatch c{i % len(PALETTE)}"></span>'
        f"{e(s.label)}</span>" for i, s in enumerate(drawn))
    return "".join(out) + f'<div class="legend">{legend}</div>'


def fmt_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S")


HUGE = 1e15
"""From here on a value is written in exponent form: 1e308 in G would be 300 digits wide."""


def fmt_number(value: float) -> str:
    if value != value:  # NaN
        return "-"
    if abs(value) >= HUGE:
        return f"{value:.3g}"
    if abs(value) >= 1e9:
        return f"{value / 1e9:.1f}G"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f}k"
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}"


def fmt_unit(value: float, unit: str) -> str:
    if abs(value) >= HUGE:
        shown = {"bytes": "B"}.get(unit, unit)
        return f"{value:.3g}" + (f" {shown}" if shown else "")
    if unit == "bytes":
        for suffix, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
            if abs(value) >= size:
                return f"{value / size:.1f} {suffix}"
        return f"{value:.0f} B"
    if unit == "ms":
        return f"{value / 1000:.1f} s" if abs(value) >= 10_000 else f"{value:.0f} ms"
    if unit == "s":
        return f"{value:.1f} s"
    return fmt_number(value) + (f" {unit}" if unit else "")
