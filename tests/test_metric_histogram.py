"""The metric state's histograms: cumulative buckets with Prometheus' ``le`` semantics."""

from __future__ import annotations

from sparkwatch.metrics.state import Histogram


def test_a_value_on_a_bound_counts_in_that_bucket_and_every_larger_one() -> None:
    h = Histogram((0.1, 1.0, 10.0))
    for value in (0.05, 0.1, 0.5, 1.0, 10.0, 11.0):
        h.observe(value)
    assert h.buckets() == [("0.1", 2), ("1.0", 4), ("10.0", 5), ("+Inf", 6)]
    assert h.count == 6
    assert h.total == 0.05 + 0.1 + 0.5 + 1.0 + 10.0 + 11.0


def test_a_value_above_every_bound_counts_only_in_inf() -> None:
    h = Histogram((1.0, 2.0))
    h.observe(1e9)
    assert h.buckets() == [("1.0", 0), ("2.0", 0), ("+Inf", 1)]


def test_an_empty_histogram_has_zero_buckets() -> None:
    assert Histogram((1.0,)).buckets() == [("1.0", 0), ("+Inf", 0)]
