"""Recording rules: the heavy expressions the dashboards use, computed once per evaluation.

Names follow ``level:metric:operations`` (level ``sparkwatch_query`` or ``sparkwatch_operator``,
the metric is the catalogue name). Windows are fixed (5m, 1h) and are part of the names, so the
committed dashboards can rely on the names whatever thresholds a deployment overrides. Results
keep only the catalogue's labels; levels and per-query rates are taken with ``max by``, so a
query scraped twice (listener and collector) is not counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.promql import (
    BY_OPERATOR,
    BY_QUERY,
    by,
    custom,
    mean_per_event,
    quantile,
    sel,
    silence_allowed,
)
from sparkwatch.metrics import catalogue as cat

RATE_WINDOW = "5m"
TREND_WINDOW = "1h"
PROJECTION_HORIZON_SECONDS = 4 * 3600

_Q = "sparkwatch_query:"
_O = "sparkwatch_operator:"
BATCH_P50 = f"{_Q}{cat.QUERY_BATCH_DURATION.name}:p50_5m"
BATCH_P95 = f"{_Q}{cat.QUERY_BATCH_DURATION.name}:p95_5m"
BATCH_MEAN = f"{_Q}{cat.QUERY_BATCH_DURATION.name}:mean_5m"
BUSY_RATIO = f"{_Q}{cat.QUERY_BATCH_DURATION.name}:busy_ratio_5m"
PHASE_MEAN = f"{_Q}{cat.QUERY_PHASE_DURATION.name}:mean_5m"
LAST_EVENT_AGE = f"{_Q}{cat.QUERY_LAST_EVENT.name}:age"
STATUS = f"{_Q}status:code"
STATE_GROWTH = f"{_O}{cat.STATE_ROWS.name}:deriv_1h"
MEMORY_PROJECTION = f"{_O}{cat.STATE_MEMORY.name}:predict_linear_1h_4h"
CACHE_HIT_RATIO = f"{_O}{custom('rocksdbReadBlockCacheHitCount').family}:ratio_5m"

# Status codes, highest first when sorted: problems, then running, idle, terminated.
FAILED, STALLED, ALERTING, RUNNING, IDLE, TERMINATED = 5, 4, 3, 2, 1, 0
STATUS_NAMES = {
    FAILED: "failed",
    STALLED: "stalled",
    ALERTING: "alerting",
    RUNNING: "running",
    IDLE: "idle",
    TERMINATED: "terminated",
}


@dataclass(frozen=True, slots=True)
class Recording:
    record: str
    expr: str
    help: str


def recordings(config: Config) -> list[Recording]:
    """The rules whose inputs the config's metric profile exports (the default has no phase
    histogram and no RocksDB metrics)."""
    s = config.selector
    every = [*_batch_rules(s), _age_rule(s), _status_rule(config), *_state_rules(s)]
    return [r for r in every if config.exports(r.expr)]


def _batch_rules(s: str) -> list[Recording]:
    h, w, q = cat.QUERY_BATCH_DURATION, RATE_WINDOW, BY_QUERY
    busy = by("max", q, f"rate({sel(h, s, suffix='_sum')}[{w}])")
    phases = mean_per_event(cat.QUERY_PHASE_DURATION, w, s, labels=q + ", phase")
    return [
        Recording(BATCH_P50, quantile(0.5, h, w, s, labels=q), "Median batch duration."),
        Recording(BATCH_P95, quantile(0.95, h, w, s, labels=q), "p95 batch duration."),
        Recording(BATCH_MEAN, mean_per_event(h, w, s, labels=q), "Mean batch duration."),
        Recording(BUSY_RATIO, busy, "Share of wall time spent running batches (1: back to back)."),
        Recording(PHASE_MEAN, phases, "Mean time per trigger phase (durationMs) per batch."),
    ]


def _age_rule(s: str) -> Recording:
    expr = f"time() - {by('max', BY_QUERY, sel(cat.QUERY_LAST_EVENT, s))}"
    return Recording(LAST_EVENT_AGE, expr, "Seconds since the query's last progress or idle event.")


def _status_rule(config: Config) -> Recording:
    stalled = config.alert("query_stalled")

    def m(metric: cat.MetricDef) -> str:
        return by("max", BY_QUERY, sel(metric, config.selector))

    # The stalled alert's limit, per query (its trigger interval).
    silence = silence_allowed(
        m(cat.QUERY_TRIGGER_INTERVAL),
        m(cat.QUERY_LAST_EVENT),
        stalled.param("max_silence_seconds"),
        stalled.param("max_silence_trigger_intervals"),
    )

    firing = by("count", BY_QUERY, 'ALERTS{alertstate="firing", query_id!=""}')
    branches = [
        f"({m(cat.QUERY_FAILED)} == 1) * 0 + {FAILED}",
        f"({m(cat.QUERY_STALLED)} == 1) * 0 + {STALLED}",
        f"(time() - {m(cat.QUERY_LAST_EVENT)} > {silence}"
        f" and {m(cat.QUERY_ACTIVE)} == 1) * 0 + {STALLED}",
        f"({firing} and {m(cat.QUERY_ACTIVE)} == 1) * 0 + {ALERTING}",
        f"({m(cat.QUERY_ACTIVE)} == 0) * 0 + {TERMINATED}",
        f"({m(cat.QUERY_IDLE)} == 1) * 0 + {IDLE}",
        f"{m(cat.QUERY_ACTIVE)} * 0 + {RUNNING}",
    ]
    # `or` keeps the first branch that has the query: the order is the precedence.
    codes = ", ".join(f"{code} {text}" for code, text in STATUS_NAMES.items())
    return Recording(STATUS, "\nor\n".join(branches), f"Query status code ({codes}).")


def _state_rules(s: str) -> list[Recording]:
    hits = f"rate({sel(custom('rocksdbReadBlockCacheHitCount'), s)}[{RATE_WINDOW}])"
    misses = f"rate({sel(custom('rocksdbReadBlockCacheMissCount'), s)}[{RATE_WINDOW}])"
    return [
        Recording(
            STATE_GROWTH,
            by("max", BY_OPERATOR, f"deriv({sel(cat.STATE_ROWS, s)}[{TREND_WINDOW}])"),
            "State rows gained per second, linear trend over the last hour.",
        ),
        Recording(
            MEMORY_PROJECTION,
            by(
                "max",
                BY_OPERATOR,
                f"predict_linear({sel(cat.STATE_MEMORY, s)}[{TREND_WINDOW}], "
                f"{PROJECTION_HORIZON_SECONDS})",
            ),
            "State memory 4 h ahead, from the last hour's linear trend.",
        ),
        Recording(
            CACHE_HIT_RATIO,
            # No block read at all (state still in the memtable) gives no ratio rather than NaN.
            by("max", BY_OPERATOR, f"{hits} / (({hits} + {misses}) > 0)"),
            "RocksDB block cache hit ratio on reads.",
        ),
    ]
