"""Alerts on the size of state: unbounded growth and memory heading for its limit."""

from __future__ import annotations

from sparkwatch.dashboards.alerts import OPERATOR, Alert, AlertFactory
from sparkwatch.dashboards.config import AlertConfig
from sparkwatch.dashboards.promql import increase, sel
from sparkwatch.metrics import catalogue as cat


def state_unbounded(c: AlertConfig, s: str) -> Alert:
    # Growth alone is normal while a window fills; growth with not a single eviction over a
    # window longer than any event-time window means nothing ever leaves the state.
    w, rows = c.window, sel(cat.STATE_ROWS, s)
    growth = f"delta({rows}[{w}])"
    removed = increase(cat.STATE_ROWS_REMOVED, w, s)
    expr = f"{growth} > 0\nand\n{removed} == 0\nand\n{rows} >= {c.param('min_rows')}"
    return Alert(
        "SparkStreamingStateUnbounded",
        c,
        expr,
        summary="State of {{ $labels.operator }} in query {{ $labels.query_name }} grows and "
        "is never evicted.",
        description=f"The state of {OPERATOR} gained rows during the last {w} and removed none "
        f"(at least {c.param('min_rows')} rows held). Without an effective watermark the state "
        "grows until executors run out of memory or disk.",
        signals=(growth, removed, rows),
        per=cat.STATE_ROWS.labels,
    )


def state_memory_filling_up(c: AlertConfig, s: str) -> Alert:
    horizon = int(c.seconds("horizon"))
    projected = f"predict_linear({sel(cat.STATE_MEMORY, s)}[{c.window}], {horizon})"
    limit = c.param("limit_bytes")
    return Alert(
        "SparkStreamingStateMemoryFillingUp",
        c,
        f"{projected} > {limit}",
        summary="State memory of {{ $labels.operator }} in query {{ $labels.query_name }} is "
        f"projected to exceed {_gib(limit)} within {c.param('horizon')}.",
        description=f"From its trend over the last {c.window}, the state memory of {OPERATOR} "
        f"will pass {limit} bytes ({_gib(limit)}) within {c.param('horizon')}.",
        signals=(projected,),
        per=cat.STATE_MEMORY.labels,
    )


def _gib(n: float) -> str:
    return f"{n / 2**30:g} GiB"


FACTORIES: dict[str, AlertFactory] = {
    "state_unbounded": state_unbounded,
    "state_memory_filling_up": state_memory_filling_up,
}
