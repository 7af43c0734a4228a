"""Doctor's checks one by one on built records (operators identified by real captured plans):
the conditions that fire each finding, and the ones that must not."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.doctor.checks_cost import check_state_time, check_store_count
from sparkwatch.doctor.checks_events import check_lost_events
from sparkwatch.doctor.checks_rocksdb import check_rocksdb
from sparkwatch.doctor.checks_state import check_unbounded_state
from sparkwatch.doctor.checks_watermark import check_excessive_delay, check_late_rows
from sparkwatch.doctor.diagnose import diagnose, worst
from sparkwatch.doctor.evidence import lateness, watermark_text
from sparkwatch.doctor.model import BatchPoint, QueryRecord, Severity
from sparkwatch.history.views import StatePoint
from sparkwatch.plan.mapping import map_plan
from sparkwatch.plan.model import QueryPlan, RawPlan, Watermark
from sparkwatch.plan.settings import BOUNDED_MEMORY

PLANS = Path(__file__).resolve().parent / "fixtures" / "plans" / "spark-4.3.0"


def plan(name: str, **settings: str) -> QueryPlan:
    data = json.loads((PLANS / f"{name}.json").read_text())
    raw = RawPlan.from_dict(data["raw"])
    raw = replace(raw, conf={**raw.conf, **settings})
    return map_plan(raw, data["operators"])


def point(batch: int, name: str = "stateStoreSave", **fields: Any) -> StatePoint:
    values: dict[str, Any] = dict(
        num_rows_total=100, num_rows_updated=10, all_updates_time_ms=10, num_rows_removed=10,
        all_removals_time_ms=0, commit_time_ms=10, memory_used_bytes=1000,
        num_rows_dropped_by_watermark=0, num_shuffle_partitions=2, num_state_store_instances=2,
        custom_metrics={},
    )
    values.update(fields)
    return StatePoint(timestamp=datetime.fromtimestamp(2000 + batch, UTC), run_id="r-1",
                      batch_id=batch, operator_index=0, operator_name=name, **values)


def batch(b: int, duration_ms: int = 1000, t0: float | None = None, span: float = 10.0,
          watermark: float | None = None) -> BatchPoint:
    start = 1000.0 + 20 * b if t0 is None else t0
    return BatchPoint(b, 2000.0 + b, duration_ms, 50, start, start + span, watermark)


def record(points: list[StatePoint], batches: list[BatchPoint] | None = None,
           query_plan: QueryPlan | None = None) -> QueryRecord:
    return QueryRecord(
        query_id="q-1", name="orders", run_id="r-1",
        batches=tuple(batches or [batch(p.batch_id) for p in points]),
        operators={0: tuple(points)}, plan=query_plan,
    )


def codes(findings: list[Any]) -> list[tuple[str, Severity]]:
    return [(f.code, f.severity) for f in findings]


def test_watermark_not_on_a_key_cannot_evict() -> None:
    growing = [point(b, num_rows_total=10 * (b + 1), num_rows_removed=0) for b in range(4)]
    found = check_unbounded_state(record(growing, query_plan=plan("agg_watermark_not_key")))
    assert codes(found) == [("watermark-not-on-key", Severity.ERROR)]
    assert "the watermark is on ts, which is not among the keys [key]" in found[0].evidence[2]
    assert 'F.window("ts"' in found[0].fix


def test_a_cause_without_growth_yet_is_information() -> None:
    flat = [point(b, num_rows_total=3, num_rows_removed=0) for b in range(4)]
    found = check_unbounded_state(record(flat, query_plan=plan("agg_no_watermark")))
    assert codes(found) == [("aggregation-without-watermark", Severity.INFO)]
    assert found[0].title == "state can never be evicted"


def test_evicting_operators_and_complete_mode_are_fine() -> None:
    growing = [point(b, num_rows_total=10 * (b + 1), num_rows_removed=0) for b in range(4)]
    assert check_unbounded_state(record(growing, query_plan=plan("window_agg"))) == []
    complete = plan("agg_no_watermark")
    only = replace(complete.operators[0], output_mode="complete")
    complete = replace(complete, operators=(only,))
    assert check_unbounded_state(record(growing, query_plan=complete)) == []


def test_arbitrary_state_that_only_grows() -> None:
    growing = [
        point(b, "applyInPandasWithState", num_rows_total=5 * (b + 1), num_rows_removed=0)
        for b in range(3)
    ]
    found = check_unbounded_state(record(growing, query_plan=plan("apply_in_pandas_with_state")))
    assert codes(found) == [("state-growing-without-removals", Severity.WARNING)]
    assert "GroupStateTimeout" in found[0].fix and "TTLConfig" in found[0].fix


def test_a_join_evicting_one_side_only_is_a_warning() -> None:
    join = plan("stream_join")
    op = join.operators[0]
    cleanup = {"left": "value", "right": None}
    one_side = replace(op, details={**op.details, "state_cleanup": cleanup})
    rows = [point(b, "symmetricHashJoin", num_rows_total=8 * (b + 1), num_rows_removed=0)
            for b in range(4)]
    found = check_unbounded_state(record(rows, query_plan=replace(join, operators=(one_side,))))
    assert codes(found) == [("join-without-time-bounds", Severity.WARNING)]
    assert "on the right side" in found[0].evidence[2]
    assert check_unbounded_state(record(rows, query_plan=join)) == []


def test_lateness_is_measured_against_earlier_batches() -> None:
    batches = [batch(0, t0=0, span=30), batch(1, t0=60, span=30), batch(2, t0=10, span=100)]
    late = lateness(batches)
    assert late is not None and (late.seconds, late.batch_id) == (80.0, 2)
    assert [watermark_text(s) for s in (5, 45, 119, 7000, 10**6)] == [
        "10 seconds", "1 minute", "2 minutes", "2 hours", "12 days"
    ]


def test_late_rows_without_a_plan_estimate_the_delay_from_the_progress() -> None:
    batches = [batch(0, t0=0, span=30), batch(1, t0=60, span=30, watermark=28.0),
               batch(2, t0=10, span=100, watermark=88.0)]
    points = [point(0), point(1), point(2, num_rows_dropped_by_watermark=5)]
    [found] = check_late_rows(record(points, batches))
    assert found.numbers["delay_ms"] == 2000
    assert 'withWatermark("<event-time column>", "2 minutes")' in found.fix
    assert found.fix.endswith("alert on spark_streaming_state_rows_dropped_by_watermark_total.")
    assert found.severity is Severity.WARNING  # 5 of 50 input rows


def test_excessive_delay() -> None:
    hour = plan("window_agg")
    op = replace(hour.operators[0], watermarks=(Watermark("ts", 3_600_000),))
    hour = replace(hour, operators=(op,))
    points = [point(b) for b in range(6)]
    [found] = check_excessive_delay(record(points, query_plan=hour))
    assert found.code == "watermark-delay-excessive" and found.severity is Severity.INFO
    assert "the watermark delay is 1h" in found.evidence[1]
    assert 'withWatermark("ts", "1 minute")' in found.fix
    assert check_excessive_delay(record(points, query_plan=plan("window_agg"))) == []


def test_commit_time_dominating_long_batches() -> None:
    slow = [point(b, commit_time_ms=3000, all_updates_time_ms=400, num_shuffle_partitions=2)
            for b in range(5)]
    batches = [batch(b, duration_ms=2500) for b in range(5)]
    [found] = check_state_time(record(slow, batches, plan("dedupe")))  # RocksDB
    assert found.code == "state-time-dominates"
    assert "a median 1.5 s committing and 200 ms updating of a median 2.5 s batch (68%)" in (
        found.evidence[1]
    )
    assert "changelogCheckpointing.enabled=true" in found.fix
    [hdfs] = check_state_time(record(slow, batches, plan("window_agg")))
    assert "RocksDBStateStoreProvider" in hdfs.fix
    short = [batch(b, duration_ms=900) for b in range(5)]
    assert check_state_time(record(slow, short, plan("dedupe"))) == []


def test_state_store_count_against_state_size() -> None:
    many = [point(b, num_rows_total=500, num_shuffle_partitions=200) for b in range(3)]
    [found] = check_store_count(record(many))
    assert found.code == "too-many-state-stores"
    assert "200 state stores hold 500 rows (2 per store)" in found.evidence[1]
    assert "spark.sql.shuffle.partitions=32" in found.fix
    few = [point(b, num_rows_total=90_000_000, num_shuffle_partitions=2) for b in range(3)]
    [found] = check_store_count(record(few))
    assert found.code == "too-few-state-stores" and "partitions=8" in found.fix
    assert check_store_count(record([point(b) for b in range(3)])) == []


def test_rocksdb_stalls_cache_and_bounded_memory() -> None:
    custom = {
        "rocksdbGetCount": 100,
        "rocksdbWriterStallLatencyMs": 400,
        "rocksdbReadBlockCacheHitCount": 1000,
        "rocksdbReadBlockCacheMissCount": 9000,
    }
    points = [point(b, custom_metrics=custom) for b in range(3)]
    bounded = plan("dedupe", **{BOUNDED_MEMORY: "true"})
    found = check_rocksdb(record(points, query_plan=bounded))
    assert codes(found) == [
        ("rocksdb-write-stalls", Severity.WARNING),
        ("rocksdb-cache-misses", Severity.INFO),
        ("memory-figure-unreliable", Severity.INFO),
    ]
    assert "writeBufferSizeMB" in found[0].fix and "blockCacheSizeMB" in found[1].fix
    assert "SPARK-48208" in found[2].evidence[1]
    assert check_rocksdb(record([point(b) for b in range(3)], query_plan=bounded)) == []


def test_diagnose_orders_by_severity() -> None:
    growing = [point(b, num_rows_total=10 * (b + 1), num_rows_removed=0,
                     num_shuffle_partitions=200) for b in range(4)]
    found = diagnose([record(growing, query_plan=plan("agg_no_watermark"))])
    assert codes(found) == [
        ("aggregation-without-watermark", Severity.ERROR),
        ("too-many-state-stores", Severity.INFO),
    ]
    assert worst(found) is Severity.ERROR and worst([]) is None


def test_batches_missing_from_the_progress_mean_lost_events() -> None:
    points = [point(b) for b in (0, 1, 2, 5, 6, 8)]
    (found,) = check_lost_events(record(points))
    assert (found.code, found.severity, found.batches) == (
        "progress-events-lost", Severity.WARNING, (0, 8)
    )
    assert found.numbers == {"missing_batches": 3, "gaps": 2}
    assert found.evidence[0] == (
        "3 of the 9 batches over batches 0–8 have no progress event, in 2 gap(s), the first "
        "batches 3–4"
    )
    assert "spark.scheduler.listenerbus.eventqueue.streams.capacity" in found.fix


def test_consecutive_batches_and_repeated_idle_progress_lose_nothing() -> None:
    assert check_lost_events(record([point(b) for b in range(10)])) == []
    repeated = [batch(b) for b in (3, 4, 4, 5)]
    assert check_lost_events(record([point(3)], batches=repeated)) == []


# --- healthy histories: each check above stays quiet on the healthy form of its history --------


def test_flat_arbitrary_state_after_its_first_batch_is_healthy() -> None:
    """applyInPandasWithState at 3 keys: empty in batch 0, flat after; +0 per batch is no leak."""
    flat = [point(b, "applyInPandasWithState", num_rows_total=0 if b == 0 else 3,
                  num_rows_removed=0) for b in range(30)]
    assert check_unbounded_state(record(flat, query_plan=plan("apply_in_pandas_with_state"))) == []
    assert check_unbounded_state(record(flat)) == []


def test_oscillating_state_is_healthy() -> None:
    wave = [point(b, "transformWithStateInPandasExec", num_rows_total=[3, 5, 2, 6, 3][b % 5],
                  num_rows_removed=0) for b in range(20)]
    assert check_unbounded_state(record(wave)) == []


def test_a_tiny_trend_on_a_large_state_is_healthy() -> None:
    creeping = [point(b, "applyInPandasWithState", num_rows_total=1_000_000 + b, num_rows_removed=0)
                for b in range(20)]
    assert check_unbounded_state(record(creeping)) == []


def test_growth_finding_states_its_fitted_rate_and_confidence() -> None:
    growing = [point(b, "applyInPandasWithState", num_rows_total=100 + 20 * b + (b % 2),
                     num_rows_removed=0) for b in range(10)]
    [found] = check_unbounded_state(record(growing))
    assert "least-squares fit +20.0 rows per batch with R² 1.00" in found.evidence[1]
    assert found.numbers["rows_per_batch"] == pytest.approx(20.0, abs=0.1)
    assert found.numbers["r_squared"] >= 0.99


def test_a_keyed_cause_with_flat_state_is_not_called_growing() -> None:
    flat = [point(b, num_rows_total=0 if b == 0 else 5, num_rows_removed=0) for b in range(10)]
    found = check_unbounded_state(record(flat, query_plan=plan("agg_no_watermark")))
    assert codes(found) == [("aggregation-without-watermark", Severity.INFO)]


def test_a_join_with_time_bounds_growing_is_healthy() -> None:
    rows = [point(b, "symmetricHashJoin", num_rows_total=8 * (b + 1), num_rows_removed=0)
            for b in range(4)]
    assert check_unbounded_state(record(rows, query_plan=plan("stream_join"))) == []


def test_no_late_rows_no_finding() -> None:
    batches = [batch(0, t0=0, span=30), batch(1, t0=60, span=30, watermark=28.0),
               batch(2, t0=100, span=30, watermark=88.0)]
    assert check_late_rows(record([point(0), point(1), point(2)], batches)) == []


def test_a_delay_close_to_the_lateness_is_not_excessive() -> None:
    minute = plan("window_agg")
    op = replace(minute.operators[0], watermarks=(Watermark("ts", 60_000),))
    minute = replace(minute, operators=(op,))
    assert check_excessive_delay(record([point(b) for b in range(6)], query_plan=minute)) == []


def test_state_time_in_a_small_share_of_long_batches_is_healthy() -> None:
    quick = [point(b, commit_time_ms=100, all_updates_time_ms=100, num_shuffle_partitions=2)
             for b in range(5)]
    batches = [batch(b, duration_ms=5000) for b in range(5)]
    assert check_state_time(record(quick, batches, plan("dedupe"))) == []


def test_a_fitting_store_count_is_healthy() -> None:
    fitting = [point(b, num_rows_total=200_000, num_shuffle_partitions=16) for b in range(3)]
    assert check_store_count(record(fitting)) == []


def test_rocksdb_with_a_warm_cache_and_no_stalls_is_healthy() -> None:
    custom = {"rocksdbGetCount": 100, "rocksdbWriterStallLatencyMs": 0,
              "rocksdbReadBlockCacheHitCount": 9000, "rocksdbReadBlockCacheMissCount": 100}
    points = [point(b, custom_metrics=custom) for b in range(3)]
    assert check_rocksdb(record(points, query_plan=plan("dedupe"))) == []
