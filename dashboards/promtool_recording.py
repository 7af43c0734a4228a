"""Value cases of the recording rules for ``promtool test rules`` (promql_expr_test).

Counters grow linearly, so rates, ratios, derivatives and projections are exact. The "alerting"
status needs a firing alert and is covered by the end-to-end test instead.
"""

from __future__ import annotations

from sparkwatch.dashboards import recording as r
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.promql import custom
from sparkwatch.dashboards.promtool_cases import OPERATOR, QUERY
from sparkwatch.dashboards.promtool_model import ExprCase, Series, minutes
from sparkwatch.metrics import catalogue as cat

T = 10  # minute of evaluation of the simple cases


def recording_cases(config: Config) -> list[ExprCase]:
    every = [status_case(config), *batch_cases(), *state_cases()]
    return [c for c in every if config.exports(c.expr)]  # the rules the profile keeps


def status_case(config: Config) -> ExprCase:
    stalled = config.alert("query_stalled")
    at = minutes(stalled.param("max_silence_seconds")) + 2
    n = at + 2

    def query(
        qid: str, active: int, idle: int, failed: int, last: str, trigger: int | None = None
    ) -> tuple[Series, ...]:
        labels = {**QUERY, "query_id": qid, "query_name": qid}
        interval = () if trigger is None else (
            Series(cat.QUERY_TRIGGER_INTERVAL, labels, f"{trigger}x{n}"),
        )
        return (
            Series(cat.QUERY_ACTIVE, labels, f"{active}x{n}"),
            Series(cat.QUERY_IDLE, labels, f"{idle}x{n}"),
            Series(cat.QUERY_FAILED, labels, f"{failed}x{n}"),
            Series(cat.QUERY_LAST_EVENT, labels, last),
            *interval,
        )

    moving = f"0+60x{n}"  # the last event is always "now"
    series = (
        *query("failed", 0, 0, 1, moving),
        *query("stalled", 1, 0, 0, f"0x{n}"),
        *query("terminated", 0, 0, 0, moving),
        *query("idle", 1, 1, 0, moving),
        *query("running", 1, 0, 0, moving),
    )
    codes = {
        "failed": r.FAILED,
        "stalled": r.STALLED,
        "terminated": r.TERMINATED,
        "idle": r.IDLE,
        "running": r.RUNNING,
    }
    if stalled.param("max_silence_trigger_intervals") >= 1:
        # As silent as "stalled", but its trigger interval (twice that silence) allows it.
        series += query("long_trigger", 1, 0, 0, f"0x{n}", trigger=at * 60 * 2)
        codes["long_trigger"] = r.RUNNING
    expected = tuple(
        ({"__name__": r.STATUS, **QUERY, "query_id": q, "query_name": q}, float(code))
        for q, code in codes.items()
    )
    return ExprCase(
        "status codes: failed, stalled, terminated, idle, running (a long trigger's silence)",
        series,
        r.STATUS,
        at,
        expected,
    )


def batch_cases() -> list[ExprCase]:
    h, phase = cat.QUERY_BATCH_DURATION, cat.QUERY_PHASE_DURATION
    add_batch = {**QUERY, "phase": "addBatch"}
    batches = (
        Series(h, QUERY, "0+30x20", "_sum"),
        Series(h, QUERY, "0+1x20", "_count"),
        Series(h, {**QUERY, "le": "1"}, "0+10x20", "_bucket"),
        Series(h, {**QUERY, "le": "5"}, "0+20x20", "_bucket"),
        Series(h, {**QUERY, "le": "+Inf"}, "0+20x20", "_bucket"),
    )
    phases = (
        Series(phase, add_batch, "0+3x20", "_sum"),
        Series(phase, add_batch, "0+1x20", "_count"),
    )
    last = (Series(cat.QUERY_LAST_EVENT, QUERY, "0x20"),)
    return [
        _one("mean batch duration: 30 s per batch", batches, r.BATCH_MEAN, QUERY, 30),
        _one("busy ratio: 30 s of batches per minute", batches, r.BUSY_RATIO, QUERY, 0.5),
        _one("median inside the first bucket", batches, r.BATCH_P50, QUERY, 1.0),
        _one("p95 interpolated in the second bucket", batches, r.BATCH_P95, QUERY, 4.6),
        _one("mean addBatch time per batch", phases, r.PHASE_MEAN, add_batch, 3),
        _one("seconds since the last event", last, r.LAST_EVENT_AGE, QUERY, T * 60),
    ]


def state_cases() -> list[ExprCase]:
    hits = custom("rocksdbReadBlockCacheHitCount")
    misses = custom("rocksdbReadBlockCacheMissCount")
    cache = (Series(hits, OPERATOR, "0+180x20"), Series(misses, OPERATOR, "0+60x20"))
    rows = (Series(cat.STATE_ROWS, OPERATOR, "0+120x20"),)
    memory = (Series(cat.STATE_MEMORY, OPERATOR, "1000+60x20"),)
    projected = 1000 + 60 * T + r.PROJECTION_HORIZON_SECONDS
    return [
        _one("block cache hit ratio: 3 hits per miss", cache, r.CACHE_HIT_RATIO, OPERATOR, 0.75),
        _one("state growth: 2 rows per second", rows, r.STATE_GROWTH, OPERATOR, 2),
        _one("memory projected 4 h ahead", memory, r.MEMORY_PROJECTION, OPERATOR, projected),
    ]


def _one(
    name: str, series: tuple[Series, ...], record: str, labels: dict[str, str], value: float
) -> ExprCase:
    return ExprCase(name, series, record, T, (({"__name__": record, **labels}, float(value)),))
