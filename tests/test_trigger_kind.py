"""The trigger kind: read from the JVM query with the plan (Spark's events carry none), exported
as an info label with its interval by both expositions, carried to the collector, and understood
by doctor (real-time batches last their interval by design; processing-time ones must not)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sparkwatch.doctor.diagnose import diagnose
from sparkwatch.doctor.model import BatchPoint, QueryRecord
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.text import generate
from sparkwatch.model.events import EventKind
from sparkwatch.plan.mapping import from_progress
from sparkwatch.plan.trigger import parse_trigger
from sparkwatch.plan.wire import plan_from_wire, plan_to_wire
from tests.conftest import FIXTURES
from tests.test_exposition import APP, Scraper, run_events


@pytest.mark.parametrize(("printed", "expected"), [
    ("RealTimeTrigger(5000)", ("real_time", 5000)),
    ("ProcessingTimeTrigger(0)", ("processing_time", 0)),
    ("ProcessingTimeTrigger(1000)", ("processing_time", 1000)),
    ("AvailableNowTrigger", ("available_now", None)),
    ("AvailableNowTrigger$", ("available_now", None)),
    ("OneTimeTrigger", ("once", None)),
    ("ContinuousTrigger(1000)", ("continuous", 1000)),
    ("org.apache.spark.sql.execution.streaming.RealTimeTrigger(60000)", ("real_time", 60000)),
    ("SomeFutureTrigger(3)", (None, None)),
    (None, (None, None)),
])
def test_spark_printed_triggers_read_as_kind_and_interval(
    printed: str | None, expected: tuple[str | None, int | None]
) -> None:
    assert parse_trigger(printed) == expected


def _scraper_with_trigger(kind: str, interval: int | None) -> tuple[Scraper, str]:
    data = json.loads((FIXTURES / "spark-4.3.0" / "window_agg_hdfs.json").read_text())
    scraper = Scraper()
    events = run_events(data)
    scraper.apply([e for e in events if e.kind is not EventKind.IDLE])
    progress = [e for e in events if e.kind is EventKind.PROGRESS][-1].event
    plan = from_progress(progress.query_id, progress.run_id,
                         [op.name for op in progress.state_operators], "test")
    scraper.state.apply_plan(APP, replace(plan, trigger=kind, trigger_interval_ms=interval))
    return scraper, progress.query_id


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name]


def test_both_expositions_label_the_trigger_and_give_its_interval() -> None:
    scraper, query_id = _scraper_with_trigger("real_time", 5000)
    driver = generate_latest(scraper.registry).decode()
    collector = b"".join(generate(scraper.registry)).decode()
    assert driver == collector  # the collector's renderer writes the same bytes
    [(labels, value)] = _samples(driver, cat.QUERY_TRIGGER_INFO.name)
    assert (labels["query_id"], labels["trigger"], value) == (query_id, "real_time", 1.0)
    assert [v for _, v in _samples(driver, cat.QUERY_TRIGGER_INTERVAL.name)] == [5.0]


def test_a_trigger_without_interval_has_no_interval_series() -> None:
    scraper, _ = _scraper_with_trigger("available_now", None)
    text = generate_latest(scraper.registry).decode()
    assert [labels["trigger"] for labels, _ in _samples(text, cat.QUERY_TRIGGER_INFO.name)] == [
        "available_now"]
    assert _samples(text, cat.QUERY_TRIGGER_INTERVAL.name) == []


def test_no_trigger_series_while_the_trigger_is_unknown() -> None:
    data = json.loads((FIXTURES / "spark-4.3.0" / "window_agg_hdfs.json").read_text())
    scraper = Scraper()
    scraper.apply(run_events(data))
    text = generate_latest(scraper.registry).decode()
    assert _samples(text, cat.QUERY_TRIGGER_INFO.name) == []


def test_while_idle_query_and_source_rates_are_0_and_last_batch_gauges_stay() -> None:
    data = json.loads((FIXTURES / "spark-4.3.0" / "window_agg_hdfs.json").read_text())
    scraper = Scraper()
    events = run_events(data)  # ends with Spark's idle event
    assert events[-1].kind is EventKind.IDLE
    last = [e for e in events if e.kind is EventKind.PROGRESS][-1].event
    scraper.apply(events)
    text = generate_latest(scraper.registry).decode()
    for family in (cat.QUERY_INPUT_RATE, cat.QUERY_PROCESSED_RATE, cat.SOURCE_INPUT_RATE,
                   cat.SOURCE_PROCESSED_RATE):
        values = [v for _, v in _samples(text, family.name)]
        assert values and set(values) == {0.0}, family.name
    assert [v for _, v in _samples(text, cat.QUERY_BATCH_ID.name)] == [last.batch_id]
    assert [v for _, v in _samples(text, cat.QUERY_LAST_INPUT_ROWS.name)] == [
        last.num_input_rows]


def test_the_trigger_travels_on_the_wire_and_a_bad_one_is_refused_naming_the_field() -> None:
    plan = replace(from_progress("q", "r", ["stateStoreSave"], "n"), trigger="real_time",
                   trigger_interval_ms=5000)
    entry = plan_to_wire(APP, plan, 1.0)
    back = plan_from_wire(json.loads(json.dumps(entry)))
    assert (back.plan.trigger, back.plan.trigger_interval_ms) == ("real_time", 5000)
    entry["payload"]["trigger"] = "<b>fast</b>"
    with pytest.raises(ValueError, match=r"plan\.trigger: expected one of"):
        plan_from_wire(entry)
    entry["payload"]["trigger"], entry["payload"]["trigger_interval_ms"] = "real_time", -5
    with pytest.raises(ValueError, match=r"plan\.trigger_interval_ms: -5 is out of range"):
        plan_from_wire(entry)


# --- doctor -----------------------------------------------------------------------------------


def _record(kind: str | None, interval: int | None, durations_ms: list[int]) -> QueryRecord:
    plan = replace(from_progress("q-1", "r-1", [], "stateless"), trigger=kind,
                   trigger_interval_ms=interval)
    batches = tuple(BatchPoint(i, 1_000_000.0 + i * 10, d, 10) for i, d in enumerate(durations_ms))
    return QueryRecord("q-1", "rt", "r-1", batches, {}, plan)


def test_real_time_batches_as_long_as_their_interval_are_healthy() -> None:
    assert diagnose([_record("real_time", 300_000, [310_000, 300_500, 301_000, 299_900])]) == []


def test_real_time_batches_far_beyond_their_interval_are_a_finding_naming_it() -> None:
    [f] = diagnose([_record("real_time", 60_000, [310_000, 300_500, 301_000, 299_900])])
    assert f.code == "real-time-batches-overrun"
    # The first batch (planning, cold caches) is left out of the median.
    assert f.numbers == {"median_batch_ms": 300_500.0, "trigger_interval_ms": 60_000}
    assert f.evidence[0] == ("median batch 5.0 min over batches 1–3 against a real_time "
                             "trigger of 60.0 s")


def test_real_time_batches_far_beyond_their_interval_are_a_finding() -> None:
    [f] = diagnose([_record("real_time", 5_000, [9_000, 12_000, 11_000, 10_500])])
    assert f.code == "real-time-batches-overrun" and "real-time mode" in f.evidence[1]


def test_processing_time_batches_are_not_judged_by_doctor() -> None:
    # The batch-duration alert watches those, with the thresholds the user sets.
    assert diagnose([_record("processing_time", 3_000, [9_000, 12_000, 11_000, 10_500])]) == []


def test_without_a_known_trigger_doctor_says_nothing_of_batch_lengths() -> None:
    assert diagnose([_record(None, None, [310_000, 300_500, 301_000, 299_900])]) == []
    assert diagnose([_record("available_now", None, [310_000, 300_500, 301_000])]) == []
