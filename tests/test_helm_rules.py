"""The chart's PrometheusRule holds exactly the generated rules, with values overrides applied
exactly as the rule builder applies them (dashboards/config.yaml is the one source)."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.config import load_config
from tests.test_helm_support import CHART, ROOT, ci_values, manifests, one, validate_schema

GENERATED = ROOT / "dashboards" / "generated" / "prometheus"


def chart_groups(values: dict[str, Any]) -> list[dict[str, Any]]:
    values = copy.deepcopy(values)
    values.setdefault("prometheusRule", {})["enabled"] = True
    return one(manifests(values), "PrometheusRule")["spec"]["groups"]


def builder_groups(
    overrides: dict[str, Any] | None = None, recording: bool = True, alerting: bool = True
) -> list[dict[str, Any]]:
    config = load_config(overrides=overrides)
    groups = []
    if recording:
        groups += rulefiles.recording_rules(config)["groups"]
    if alerting:
        groups += rulefiles.alerting_rules(config)["groups"]
    return groups


def test_default_values_give_exactly_the_generated_rule_files() -> None:
    generated = [
        g
        for name in ("sparkwatch-recording-rules.yaml", "sparkwatch-alerts.yaml")
        for g in yaml.safe_load((GENERATED / name).read_text())["groups"]
    ]
    assert chart_groups({}) == generated
    # The chart also ships the generated files themselves, byte for byte.
    for name in ("sparkwatch-recording-rules.yaml", "sparkwatch-alerts.yaml"):
        assert (CHART / "files" / "prometheus" / name).read_text() == (GENERATED / name).read_text()


OVERRIDES = {
    "every-threshold": {
        "alerts": {
            "state_unbounded": {"min_rows": 50000, "window": "2h", "for": "45m"},
            "state_memory_filling_up": {
                "limit_bytes": 10_000_000_000,
                "horizon": "1h30m",
                "window": "30m",
                "severity": "critical",
            },
            "watermark_lag": {"max_seconds": 3600},
            "watermark_not_advancing": {"window": "30m", "for": "20m"},
            "rows_dropped_by_watermark": {"max_ratio": 0.125, "window": "5m"},
            "processing_slower_than_input": {"min_ratio": 1.5, "window": "20m"},
            "source_backlog_growing": {"min_offsets": 250000, "window": "30m"},
            "batch_duration": {"max_seconds": 120, "window": "20m", "severity": "info"},
            "query_stalled": {"max_silence_seconds": 900, "for": "5m"},
            "query_failed": {"window": "1h", "for": "1m"},
            "listener_dropping_events": {"window": "30m"},
            "listener_delivery_failing": {"window": "20m", "for": "15m"},
        },
    },
    "selector-labels-runbook": {
        "selector": 'job="spark-drivers", namespace="etl"',
        "runbook_url": "https://runbooks.example.com/sparkwatch",
        "extra_labels": {"team": "data-platform", "severity": "page"},
    },
    "disabled-alerts": {
        "alerts": {
            "query_failed": {"enabled": False},
            "state_unbounded": {"enabled": False},
            "state_memory_filling_up": {"enabled": False},
        },
    },
    "fractional-values": {
        "alerts": {
            "watermark_lag": {"max_seconds": 1800.5},
            "rows_dropped_by_watermark": {"max_ratio": 0.005},
            "state_memory_filling_up": {"limit_bytes": 1536 * 2**20, "horizon": "90m"},
        },
    },
}


@pytest.mark.parametrize("name", sorted(OVERRIDES))
def test_overrides_give_what_the_rule_builder_gives(name: str) -> None:
    overrides = OVERRIDES[name]
    assert chart_groups({"rules": overrides}) == builder_groups(overrides)


def test_ci_overrides_file_matches_the_builder() -> None:
    values = ci_values(CHART / "ci" / "rules-overrides-values.yaml")
    assert chart_groups(values) == builder_groups(values["rules"], recording=False)


def test_same_override_as_the_rules_build_cli(tmp_path: Path) -> None:
    sets = [
        "alerts.watermark_lag.max_seconds=7200",
        "alerts.watermark_lag.for=1h",
        "alerts.query_stalled.max_silence_seconds=1200",
        'selector=job="spark"',
        "alerts.rows_dropped_by_watermark.enabled=false",
    ]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "sparkwatch.cli.main",
            "rules",
            "build",
            "--output",
            str(tmp_path),
            *[a for s in sets for a in ("--set", s)],
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    built = [
        g
        for name in ("sparkwatch-recording-rules.yaml", "sparkwatch-alerts.yaml")
        for g in yaml.safe_load(
            (tmp_path / rulefiles.RECORDING_FILE).parent.joinpath(name).read_text()
        )["groups"]
    ]
    values = {
        "rules": {
            "selector": 'job="spark"',
            "alerts": {
                "watermark_lag": {"max_seconds": 7200, "for": "1h"},
                "query_stalled": {"max_silence_seconds": 1200},
                "rows_dropped_by_watermark": {"enabled": False},
            },
        }
    }
    assert chart_groups(values) == built


def test_alerting_and_recording_toggles() -> None:
    only_alerts = chart_groups({"prometheusRule": {"recording": False}})
    assert only_alerts == builder_groups(recording=False)
    only_recording = chart_groups({"prometheusRule": {"alerting": False}})
    assert only_recording == builder_groups(alerting=False)


REFUSED_BY_THE_BUILD: dict[str, dict[str, Any]] = {
    "selector without quotes": {"selector": "job=spark"},
    "selector with a trailing comma": {"selector": 'job="x",'},
    "selector with an empty matcher": {"selector": 'job="x", , env="y"'},
    "a string escape PromQL cannot read": {"selector": 'job=~"spark\\d"'},
    "window of zero": {"alerts": {"state_unbounded": {"window": "0s"}}},
    "horizon of zero": {"alerts": {"state_memory_filling_up": {"horizon": "0h0m"}}},
    "units out of order": {"alerts": {"watermark_lag": {"for": "30m1h"}}},
    "an empty duration": {"alerts": {"watermark_lag": {"for": ""}}},
    "label name with a dash": {"extra_labels": {"team-name": "x"}},
    "label name with a leading digit": {"extra_labels": {"1team": "x"}},
    # The numbers, by what each is (NUMBER_KEYS): the schema was "a number of 0 or more".
    "a share above 1": {"alerts": {"rows_dropped_by_watermark": {"max_ratio": 5}}},
    "a rate factor below 1": {"alerts": {"processing_slower_than_input": {"min_ratio": 0.5}}},
    "a lag threshold of zero": {"alerts": {"watermark_lag": {"max_seconds": 0}}},
    "fractional rows": {"alerts": {"state_unbounded": {"min_rows": 0.5}}},
}


@pytest.mark.parametrize("name", sorted(REFUSED_BY_THE_BUILD))
def test_values_the_rule_builder_refuses_are_refused_by_the_charts_schema(name: str) -> None:
    """Before, the chart rendered them into a PrometheusRule that Prometheus (or the operator's
    admission webhook) refused, while `sparkwatch rules build` refused them in one line."""
    from sparkwatch.dashboards.config import ConfigError

    rules = REFUSED_BY_THE_BUILD[name]
    with pytest.raises(ConfigError):
        load_config(overrides=rules)
    with pytest.raises(helm_python.HelmValuesError) as caught:
        validate_schema({"rules": rules})
    # Helm names the key's path, or for a label name (a property name) the name itself.
    named = [f"'{label}'" for label in rules.get("extra_labels", {})] or ["/rules/"]
    assert all(n in str(caught.value) for n in named), str(caught.value)


ACCEPTED_BY_BOTH: dict[str, dict[str, Any]] = {
    "selector of every quoting": {"selector": "job=\"a\\\"b\", env='etl', x=~`sp.*`, y!=\"z\""},
    "durations of several units": {"alerts": {"state_unbounded": {"window": "1h30m",
                                                                  "for": "0s"}}},
    "milliseconds": {"alerts": {"state_memory_filling_up": {"horizon": "1500ms"}}},
    "label names": {"extra_labels": {"_team": "x", "Team2": "y"}},
    "numbers at the ends of their ranges": {"alerts": {
        "rows_dropped_by_watermark": {"max_ratio": 1},
        "processing_slower_than_input": {"min_ratio": 1},
        "state_unbounded": {"min_rows": 0}}},
}


@pytest.mark.parametrize("name", sorted(ACCEPTED_BY_BOTH))
def test_values_the_rule_builder_accepts_render_the_builders_rules(name: str) -> None:
    rules = ACCEPTED_BY_BOTH[name]
    validate_schema({"rules": rules})
    assert chart_groups({"rules": rules}) == builder_groups(rules)
