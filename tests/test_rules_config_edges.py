"""Config values at the edges: every value the rules build accepts gives rules promtool accepts and
generated promtool tests that pass; a value that cannot is refused in one line naming its key."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from sparkwatch.cli.main import main
from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.alerts import build_alerts
from sparkwatch.dashboards.config import load_config
from sparkwatch.dashboards.files import rule_files, write
from sparkwatch.dashboards.promtool_tests import ALERTS_TEST, RECORDING_TEST


def run_promtool(binary: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def assert_rules_and_their_tests_pass(binary: str, root: Path, key: str) -> None:
    """promtool checks every rule and runs the cases of alert ``key`` (the others are the
    defaults', which tests/test_rules.py runs: each case evaluates every rule, so the whole file
    takes some 15 s a config) and the recording rules' cases."""
    keep_cases_of(root / ALERTS_TEST, key)
    for path in (rulefiles.RECORDING_FILE, rulefiles.ALERTS_FILE):
        checked = run_promtool(binary, "check", "rules", path, cwd=root)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run_promtool(binary, "test", "rules", ALERTS_TEST, RECORDING_TEST, cwd=root)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr


def keep_cases_of(path: Path, key: str) -> None:
    [name] = [a.name for a in build_alerts(load_config()) if a.config.key == key]
    doc = yaml.safe_load(path.read_text())
    doc["tests"] = [t for t in doc["tests"] if t["name"].startswith(f"{name}: ")]
    assert doc["tests"], f"no case of {name}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


@pytest.mark.parametrize(
    "assignment",
    [
        "alerts.watermark_lag.for=90s",
        "alerts.query_failed.window=90s",
        "alerts.query_failed.for=1500ms",
        "alerts.state_memory_filling_up.horizon=500ms",
        "alerts.state_unbounded.window=1h30m",
        "alerts.listener_dropping_events.window=1m",
        "alerts.collector_quarantining.window=90s",
        "alerts.query_stalled.max_silence_seconds=90",
        "alerts.worker_hung.max_silence_seconds=30",
        "alerts.rows_dropped_by_watermark.max_ratio=0",
        "alerts.state_unbounded.min_rows=0",
        "alerts.state_unbounded.min_rows=7",
        # Its "still small" case grew by one offset a sample, past a floor of a few: it failed.
        "alerts.source_backlog_growing.min_offsets=0",
        "alerts.source_backlog_growing.min_offsets=1",
    ],
)
def test_durations_and_limits_off_the_minute_build_rules_whose_promtool_tests_pass(
    assignment: str, promtool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "build", "--output", str(tmp_path), "--set", assignment]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert_rules_and_their_tests_pass(promtool, tmp_path, assignment.split(".")[1])


def test_a_window_for_a_faster_scrape_builds_rules_and_leaves_its_minute_cases_out(
    promtool: str, tmp_path: Path
) -> None:
    """45 s holds one sample of the cases' 1-minute series: their rate() would be empty."""
    assert main(["rules", "build", "--output", str(tmp_path), "--set",
                 "alerts.listener_dropping_events.window=45s"]) == 0
    for path in (rulefiles.RECORDING_FILE, rulefiles.ALERTS_FILE):
        checked = run_promtool(promtool, "check", "rules", path, cwd=tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    rules = (tmp_path / rulefiles.ALERTS_FILE).read_text()
    assert "[45s]" in rules
    names = [t["name"] for t in yaml.safe_load((tmp_path / ALERTS_TEST).read_text())["tests"]]
    assert names and not [n for n in names if n.startswith("SparkwatchListenerDroppingEvents:")]


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("selector=job=spark", "selector: not PromQL label matchers"),
        ('selector=job="x",', "selector: not PromQL label matchers"),
        ('selector=job="x", , env="y"', "selector: not PromQL label matchers"),
        ('selector=job=~"spark\\d"', "selector: not PromQL label matchers"),
        ("alerts.state_unbounded.window=0s", "alerts.state_unbounded.window must be longer than 0"),
        (
            "alerts.state_memory_filling_up.horizon=0ms",
            "alerts.state_memory_filling_up.horizon must be longer than 0",
        ),
        ("alerts.watermark_lag.for=30m1h", "alerts.watermark_lag.for: not a Prometheus duration"),
        ("extra_labels.team-name=x", "extra_labels.team-name: not a Prometheus label name"),
        ("extra_labels.1team=x", "extra_labels.1team: not a Prometheus label name"),
        (
            "alerts.query_stalled.max_silence_trigger_intervals=0",
            "alerts.query_stalled.max_silence_trigger_intervals must be above 0",
        ),
    ],
)
def test_values_promtool_would_reject_are_refused_in_one_line_naming_the_key(
    assignment: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["rules", "build", "--check", "--set", assignment]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize(
    "selector",
    [
        'job="spark-drivers", namespace="etl"',
        "job='spark'",
        'job=~"spark-.*",env!="dev"',
        ' job != "a\\"b\\\\" , cluster!~`x|y` ',
        'path="C:\\x41\\u00e9\\101"',
    ],
)
def test_selectors_of_any_valid_matcher_syntax_build_rules_promtool_accepts(
    selector: str, promtool: str, tmp_path: Path
) -> None:
    write(rule_files(load_config(overrides={"selector": selector})), tmp_path)
    for path in (rulefiles.RECORDING_FILE, rulefiles.ALERTS_FILE):
        checked = promtool_run(promtool, path, tmp_path)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def promtool_run(binary: str, path: str, root: Path) -> subprocess.CompletedProcess[str]:
    return run_promtool(binary, "check", "rules", path, cwd=root)


def test_a_per_query_name_with_a_quote_is_escaped_in_both_branches(
    promtool: str, tmp_path: Path
) -> None:
    # 'a"b' has its own interval of 100 s: batches of 80 s are fine for it, and the default
    # branch (60 s) must leave it out, which only an escaped `!~` regex does.
    name = 'a"b\\c.d'
    config = load_config(overrides={"alerts": {"batch_duration": {"per_query": {name: 100}}}})
    write(rule_files(config), tmp_path)
    quoted = name.replace("\\", "\\\\").replace('"', '\\"')
    labels = f'app_name="x", app_id="app-1", query_id="q1", query_name="{quoted}"'
    base = "spark_streaming_query_batch_duration_seconds"
    tests = {
        "rule_files": [rulefiles.ALERTS_FILE],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f"{base}_sum{{{labels}}}", "values": "0+80x40"},
                    {"series": f"{base}_count{{{labels}}}", "values": "0+1x40"},
                ],
                "alert_rule_test": [
                    {"eval_time": f"{m}m", "alertname": "SparkStreamingBatchDurationAboveTrigger",
                     "exp_alerts": []}
                    for m in (20, 40)
                ],
            }
        ],
    }
    (tmp_path / "quote.test.yaml").write_text(yaml.safe_dump(tests))
    checked = promtool_run(promtool, rulefiles.ALERTS_FILE, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run_promtool(promtool, "test", "rules", "quote.test.yaml", cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr


@pytest.mark.parametrize(
    ("ratio", "shown"),
    [(0.001, "0.1%"), (0.005, "0.5%"), (0.01, "1%"), (0.125, "12.5%"), (0.07, "7%"), (1, "100%")],
)
def test_the_late_rows_description_shows_small_ratios_as_they_are(ratio: float, shown: str) -> None:
    config = load_config(overrides={"alerts": {"rows_dropped_by_watermark": {"max_ratio": ratio}}})
    (alert,) = [a for a in build_alerts(config) if a.config.key == "rows_dropped_by_watermark"]
    assert f"dropped more than {shown} of the query's input rows" in alert.description
