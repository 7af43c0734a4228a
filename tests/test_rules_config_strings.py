"""Config strings and YAML at the edges: a selector the rules build accepts gives generated promtool
tests that pass; a selector, runbook URL, alert label, per-query name, duration or YAML document
that Prometheus (or the build) cannot use is refused in one line naming its key, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from sparkwatch.cli.main import main
from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.config import ConfigError, load_config, read_yaml
from sparkwatch.dashboards.promtool_tests import ALERTS_TEST, RECORDING_TEST
from tests.test_helm_support import validate_schema

ROOT = Path(__file__).resolve().parent.parent


def run_promtool(binary: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )


def build(tmp_path: Path, text: str) -> tuple[int, str]:
    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    code = main(["rules", "build", "--config", str(config), "--output", str(out)])
    return code, str(out)


@pytest.mark.parametrize(
    "selector",
    [
        'job="spark-drivers"',  # config.yaml's own example
        'job=""',
        "job=~\"spark-.*\", namespace='etl', env!~`dev|test`, cluster!=\"us\"",
        'job="spark-drivers", instance="driver-0:9750"',
    ],
)
def test_a_selector_builds_rules_whose_generated_promtool_tests_all_pass(
    selector: str, promtool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, the generated input series lacked the selector's labels: every firing case of
    job="spark-drivers" failed, and job="" broke the twice-scraped cases (job="spark-driver")."""
    code, out = build(tmp_path, yaml.safe_dump({"selector": selector}))
    assert code == 0, capsys.readouterr().err
    root = Path(out)
    for path in (rulefiles.RECORDING_FILE, rulefiles.ALERTS_FILE):
        checked = run_promtool(promtool, "check", "rules", path, cwd=root)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run_promtool(promtool, "test", "rules", ALERTS_TEST, RECORDING_TEST, cwd=root)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr
    alerts = yaml.safe_load((root / ALERTS_TEST).read_text())
    assert any(t["alert_rule_test"][-1]["exp_alerts"] for t in alerts["tests"])  # firing cases


def test_a_selector_fixing_the_job_keeps_the_two_scrape_targets_apart_by_instance() -> None:
    from sparkwatch.dashboards.config import fit_labels

    driver = fit_labels('job="spark-drivers"', {"job": "spark-driver", "instance": "d:1"})
    collector = fit_labels('job="spark-drivers"', {"job": "c", "instance": "c:1"})
    assert driver == {"job": "spark-drivers", "instance": "d:1"}
    assert collector == {"job": "spark-drivers", "instance": "c:1"}
    assert fit_labels('job=""', {"job": "spark-driver", "instance": "d:1"}) == {"instance": "d:1"}


REFUSED: dict[str, tuple[str, str]] = {
    # name: (config YAML, text the error must contain)
    "selector with a bad regex": ("selector: 'job=~\"(\"'\n", "selector"),
    "selector with an octal escape above 377": ("selector: 'job=\"\\777\"'\n", "selector"),
    "selector with a surrogate escape": ("selector: 'job=\"\\ud800\"'\n", "selector"),
    "selector with a code point above 10FFFF": ("selector: 'job=\"\\U00110000\"'\n", "selector"),
    "selector escaping the other quote": ("selector: \"job=\\\"a\\\\'b\\\"\"\n", "selector"),
    "selector on __name__": ("selector: '__name__=\"foo\"'\n", "selector"),
    "selector with a look-ahead": ("selector: 'job=~\"(?=a)a\"'\n", "selector"),
    "selector no series can match": ("selector: 'job!~\".*\"'\n", "selector"),
    "runbook_url with an unclosed template": ('runbook_url: "https://x/{{ oops"\n', "runbook_url"),
    "runbook_url with a template": ('runbook_url: "https://x/{{ $value }}"\n', "runbook_url"),
    "runbook_url with a newline": ('runbook_url: "https://x/\\nb"\n', "runbook_url"),
    "runbook_url not http": ('runbook_url: "javascript:alert(1)"\n', "runbook_url"),
    "label name with a trailing newline": ('extra_labels: {"team\\n": x}\n', "extra_labels.team"),
    "label name __name__": ("extra_labels: {__name__: x}\n", "extra_labels.__name__"),
    "label name with __": ("extra_labels: {__team: x}\n", "extra_labels.__team"),
    "label value with a template": (
        'extra_labels: {team: "{{ $labels.app_name }}"}\n', "extra_labels.team"),
    "label value with an unclosed template": (
        'extra_labels: {team: "{{ x"}\n', "extra_labels.team"),
    "empty label value": ('extra_labels: {team: ""}\n', "extra_labels.team"),
    "null label value": ("extra_labels: {team: null}\n", "extra_labels.team"),
    "list label value": ("extra_labels: {team: [a, b]}\n", "extra_labels.team"),
    "per_query name a number": (
        "alerts: {batch_duration: {per_query: {1: 10}}}\n", "alerts.batch_duration.per_query"),
    "per_query name null": (
        "alerts: {batch_duration: {per_query: {null: 10}}}\n", "alerts.batch_duration.per_query"),
    "per_query name a bool": (
        "alerts: {batch_duration: {per_query: {true: 10}}}\n", "alerts.batch_duration.per_query"),
    "duration with a trailing newline": (
        'alerts: {watermark_lag: {for: "15m\\n"}}\n', "alerts.watermark_lag.for"),
    "duration above Go's time.Duration": (
        "alerts: {watermark_lag: {for: 99999999999999y}}\n", "alerts.watermark_lag.for"),
    "duration just above 292 years": (
        "alerts: {watermark_lag: {for: 293y}}\n", "alerts.watermark_lag.for"),
    "duplicate key": ("alerts:\n  watermark_lag:\n    for: 15m\n    for: 1h\n", "line 4"),
    "YAML anchor and alias": (
        "extra_labels:\n  team: &t data\n  owner: *t\n", "line 2"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_value_prometheus_cannot_use_is_refused_with_exit_2_naming_its_key(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, key = REFUSED[name]
    code, _ = build(tmp_path, text)
    err = capsys.readouterr().err
    assert code == 2, err
    assert key in err, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_a_yaml_alias_bomb_is_refused_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, these 322 bytes took 486 s and 600 MB to expand."""
    lines = ['extra_labels:\n  team: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 6):
        lines.append(f"  t{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]")
    code, _ = build(tmp_path, "\n".join(lines) + "\n")
    err = capsys.readouterr().err
    assert code == 2 and "config.yaml" in err and "anchor" in err, err


def test_the_defaults_and_the_charts_values_still_load() -> None:
    """Neither uses anchors nor repeats a key."""
    load_config()
    values = read_yaml(ROOT / "helm" / "sparkwatch" / "values.yaml")
    assert load_config(overrides=values["rules"]) == load_config()


def test_an_empty_runbook_url_and_single_braces_are_still_accepted() -> None:
    config = load_config(overrides={"runbook_url": "", "extra_labels": {"team": "a{b}c"}})
    assert config.runbook_url == "" and config.extra_labels == {"team": "a{b}c"}
    load_config(overrides={"runbook_url": "http://wiki/x?a={b}"})


CHART_REFUSES: dict[str, dict[str, Any]] = {
    "selector octal above 377": {"selector": 'job="\\777"'},
    "selector surrogate": {"selector": 'job="\\ud800"'},
    "selector other quote escaped": {"selector": "job=\"a\\'b\""},
    "selector on __name__": {"selector": '__name__="foo"'},
    "runbook_url template": {"runbook_url": "https://x/{{ $value }}"},
    "runbook_url newline": {"runbook_url": "https://x/\nb"},
    "runbook_url not http": {"runbook_url": "javascript:alert(1)"},
    "label name __name__": {"extra_labels": {"__name__": "x"}},
    "label value template": {"extra_labels": {"team": "{{ x }}"}},
    "label value empty": {"extra_labels": {"team": ""}},
    "label value newline": {"extra_labels": {"team": "a\nb"}},
}


@pytest.mark.parametrize("name", sorted(CHART_REFUSES))
def test_the_charts_schema_refuses_what_the_build_refuses(name: str) -> None:
    rules = CHART_REFUSES[name]
    with pytest.raises(ConfigError):
        load_config(overrides=rules)
    with pytest.raises(helm_python.HelmValuesError):
        validate_schema({"rules": rules})


def test_the_charts_schema_accepts_what_the_build_accepts() -> None:
    rules = {
        "selector": "job=\"a\\\"b\\377\\u00e9\", env='x\\'y', re=~`sp.*`",
        "runbook_url": "https://wiki.example/runbooks/{id}",
        "extra_labels": {"team": "data{platform}", "_x": "y"},
    }
    load_config(overrides=rules)
    validate_schema({"rules": rules})
