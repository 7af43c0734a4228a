"""The quota on label value length names the first value over it, with its field, whichever
group the value stands in (custom metric keys, observed metrics, source and sink metrics)."""

from __future__ import annotations

import copy
from typing import Any

from sparkwatch.collector.limits import Caps, _shape_refusal
from tests.test_history_support import load_sample, progress

RAW = load_sample("window_agg")
CAPS = Caps(max_apps=10, max_queries_per_app=10, max_operators_per_query=8,
            max_label_value_chars=40)


def with_changes(change: Any) -> dict[str, Any]:
    raw = copy.deepcopy(RAW)
    change(raw)
    return raw


def refusal_message(raw: dict[str, Any]) -> str | None:
    refusal = _shape_refusal(progress(raw), CAPS)
    assert refusal is None or refusal.quota == "max_label_value_chars"
    return None if refusal is None else refusal.message


def test_a_recorded_progress_event_fits() -> None:
    assert refusal_message(RAW) is None


def test_a_long_custom_metric_key_is_named_with_its_operator() -> None:
    def long_key(raw: dict[str, Any]) -> None:
        raw["stateOperators"][0]["customMetrics"]["k" * 41] = 1

    assert refusal_message(with_changes(long_key)) == (
        "payload.stateOperators[0].customMetrics key is 41 characters, over the limit of 40 "
        "(max_label_value_chars)")


def test_the_first_long_value_in_the_event_is_the_one_named() -> None:
    def two_long(raw: dict[str, Any]) -> None:
        raw["name"] = "n" * 45
        raw["sink"]["metrics"] = {"s" * 50: "1"}

    assert str(refusal_message(with_changes(two_long))).startswith(
        "payload.name is 45 characters")


def test_long_source_and_sink_metric_keys_are_refused_too() -> None:
    def long_source(raw: dict[str, Any]) -> None:
        raw["sources"][0]["metrics"] = {"m" * 60: "1"}

    def long_sink(raw: dict[str, Any]) -> None:
        raw["sink"]["metrics"] = {"s" * 50: "1"}

    assert str(refusal_message(with_changes(long_source))).startswith(
        "payload.sources[0].metrics key is 60 characters")
    assert str(refusal_message(with_changes(long_sink))).startswith(
        "payload.sink.metrics key is 50 characters")


def test_an_observation_is_checked_with_its_columns_before_the_next_observation() -> None:
    def long_column_then_long_name(raw: dict[str, Any]) -> None:
        raw["observedMetrics"] = {"a": {"c" * 50: 1}, "o" * 45: {"x": 1}}

    assert str(refusal_message(with_changes(long_column_then_long_name))).startswith(
        "payload.observedMetrics['a'] key is 50 characters")
