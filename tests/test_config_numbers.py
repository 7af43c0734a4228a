"""Numeric thresholds of the rules config are checked for what they are: a finite number, in the
range its rule makes sense for (seconds and bytes above 0, counts whole and at least 0, the share
of late rows from 0 to 1, rate factors at least 1). A value outside is refused in one line naming
the key, exit 2, and never reaches a rule (``> nan`` never fires, ``> -1`` always does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sparkwatch.cli.main import main
from sparkwatch.dashboards.config import (
    DEFAULTS_PATH,
    FREE_MAPS,
    NUMBER_KEYS,
    ConfigError,
    load_config,
    read_yaml,
)
from tests.test_rules_config_edges import assert_rules_and_their_tests_pass

LAG = "alerts.watermark_lag.max_seconds"
LATE = "alerts.rows_dropped_by_watermark.max_ratio"


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``sparkwatch rules build --check *argv`` exits 2 with one line: that line."""
    assert main(["rules", "build", "--check", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


def numeric_defaults() -> list[tuple[str, str, Any]]:
    """(alert, key, default) of every number under an alert of the defaults."""
    alerts = read_yaml(DEFAULTS_PATH)["alerts"]
    return [
        (alert, name, value)
        for alert, body in alerts.items()
        for name, value in body.items()
        if name not in FREE_MAPS and isinstance(value, int | float) and not isinstance(value, bool)
    ]


@pytest.mark.parametrize("value", [".nan", ".NaN", ".inf", "-.inf", "1" + "0" * 400])
@pytest.mark.parametrize(
    "key",
    [LAG, LATE, "alerts.state_memory_filling_up.limit_bytes", "alerts.state_unbounded.min_rows",
     "alerts.batch_duration.real_time_max_ratio", "alerts.batch_duration.per_query.orders"],
)
def test_nan_and_infinite_thresholds_are_refused_naming_the_key(
    key: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f"{key} must be a finite number" in refused(capsys, "--set", f"{key}={value}")


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (f"{LAG}=-1", f"{LAG} must be above 0, got -1"),
        (f"{LAG}=0", f"{LAG} must be above 0, got 0"),
        ("alerts.batch_duration.max_seconds=-0.5", "batch_duration.max_seconds must be above 0"),
        ("alerts.query_stalled.max_silence_seconds=0", "max_silence_seconds must be above 0"),
        ("alerts.worker_hung.max_silence_seconds=-300", "max_silence_seconds must be above 0"),
        ("alerts.state_memory_filling_up.limit_bytes=0", "limit_bytes must be above 0 bytes"),
        ("alerts.state_unbounded.min_rows=-1", "min_rows must be at least 0 rows, got -1"),
        ("alerts.source_backlog_growing.min_offsets=-5", "min_offsets must be at least 0"),
        ("alerts.query_stalled.max_silence_trigger_intervals=-1", "must be above 0, got -1"),
        ("alerts.batch_duration.per_query.orders=-10", "per_query.orders must be above 0"),
        ("alerts.batch_duration.per_query.orders=0", "per_query.orders must be above 0"),
    ],
)
def test_negative_or_zero_thresholds_that_would_always_fire_are_refused(
    assignment: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in refused(capsys, "--set", assignment)


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        (f"{LATE}=5", f"{LATE} must be from 0 to 1 (a share of the input rows"),
        (f"{LATE}=1.01", f"{LATE} must be from 0 to 1"),
        (f"{LATE}=-0.1", f"{LATE} must be from 0 to 1"),
        ("alerts.processing_slower_than_input.min_ratio=0.5", "min_ratio must be at least 1"),
        ("alerts.processing_slower_than_input.min_ratio=-2", "min_ratio must be at least 1"),
        ("alerts.batch_duration.real_time_max_ratio=0.9", "real_time_max_ratio must be at least 1"),
    ],
)
def test_ratios_out_of_their_range_are_refused_saying_the_range(
    assignment: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in refused(capsys, "--set", assignment)


@pytest.mark.parametrize("value", ["true", "false", "yes", "soon", "nan", "'60'", "1e3", "[1]"])
@pytest.mark.parametrize("key", [LAG, LATE, "alerts.query_stalled.max_silence_trigger_intervals"])
def test_a_boolean_or_a_string_for_a_number_says_it_must_be_a_number(
    key: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, "--set", f"{key}={value}")
    assert f"{key} must be a number" in err and "true or false" not in err, err


@pytest.mark.parametrize("value", ["true", "soon", ".nan", "-1"])
def test_a_per_query_interval_that_is_not_a_positive_number_names_the_query(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = refused(capsys, "--set", f"alerts.batch_duration.per_query.orders={value}")
    assert "alerts.batch_duration.per_query.orders must be" in err, err


@pytest.mark.parametrize(
    "key",
    ["alerts.state_unbounded.min_rows", "alerts.source_backlog_growing.min_offsets",
     "alerts.state_memory_filling_up.limit_bytes"],
)
def test_counts_of_rows_offsets_and_bytes_must_be_whole(
    key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert f"{key} must be a whole number, got 10.5" in refused(capsys, "--set", f"{key}=10.5")


def test_a_boolean_for_a_flag_or_a_string_keeps_its_own_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert "enabled must be true or false" in refused(
        capsys, "--set", "alerts.watermark_lag.enabled=1")
    assert "selector must be a string" in refused(capsys, "--set", "selector=true")


def test_a_config_file_with_nan_is_refused_like_a_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("alerts:\n  watermark_lag:\n    max_seconds: .nan\n")
    assert f"{LAG} must be a finite number, got .nan" in refused(capsys, "--config", str(path))


def test_overrides_from_code_are_checked_too() -> None:
    with pytest.raises(ConfigError, match="max_ratio must be from 0 to 1"):
        load_config(overrides={"alerts": {"rows_dropped_by_watermark": {"max_ratio": 5}}})
    with pytest.raises(ConfigError, match="max_seconds must be a finite number"):
        load_config(overrides={"alerts": {"watermark_lag": {"max_seconds": float("nan")}}})


def test_every_numeric_default_has_a_range_and_fits_it() -> None:
    found = numeric_defaults()
    assert found
    assert {name for _, name, _ in found} == set(NUMBER_KEYS)
    for alert, name, value in found:
        assert NUMBER_KEYS[name].problem(value) is None, f"alerts.{alert}.{name}={value}"


@pytest.mark.parametrize("command", ["rules", "dashboards"])
def test_the_defaults_still_build(command: str, tmp_path: Path) -> None:
    assert main([command, "build", "--output", str(tmp_path)]) == 0


@pytest.mark.parametrize(
    "assignment",
    [
        f"{LATE}=1",
        "alerts.processing_slower_than_input.min_ratio=1",
        "alerts.batch_duration.real_time_max_ratio=1",
        "alerts.state_memory_filling_up.limit_bytes=1",
        f"{LAG}=0.5",
        "alerts.state_memory_filling_up.limit_bytes=1.0e+10",
    ],
)
def test_the_edges_of_each_range_build_rules_whose_promtool_tests_pass(
    assignment: str, promtool: str, tmp_path: Path
) -> None:
    assert main(["rules", "build", "--output", str(tmp_path), "--set", assignment]) == 0
    assert_rules_and_their_tests_pass(promtool, tmp_path, assignment.split(".")[1])
