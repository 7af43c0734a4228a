"""The Prometheus rules: committed files equal the build, promtool checks and unit tests pass,
every alert is covered and documented, names come from the catalogue, the config drives them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkwatch.cli.main import main
from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.alerts import build_alerts
from sparkwatch.dashboards.config import ConfigError, load_config
from sparkwatch.dashboards.files import PACKAGE_DIR, rule_files, stale, write
from sparkwatch.dashboards.promtool_model import render
from sparkwatch.dashboards.promtool_tests import ALERTS_TEST, RECORDING_TEST
from sparkwatch.dashboards.recording import recordings
from sparkwatch.metrics import catalogue as cat
from tests.conftest import ROOT

RULE_FILES = [PACKAGE_DIR / rulefiles.RECORDING_FILE, PACKAGE_DIR / rulefiles.ALERTS_FILE]
TEST_FILES = [PACKAGE_DIR / ALERTS_TEST, PACKAGE_DIR / RECORDING_TEST]
RUNBOOKS = ROOT / "docs" / "runbooks.md"


def promtool_run(promtool: str, *args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [promtool, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def committed_alert_rules() -> list[dict[str, Any]]:
    data = yaml.safe_load((PACKAGE_DIR / rulefiles.ALERTS_FILE).read_text())
    return [rule for group in data["groups"] for rule in group["rules"]]


def test_committed_rules_and_promtool_tests_equal_the_build() -> None:
    assert stale(rule_files(load_config()), PACKAGE_DIR) == [], (
        "generated rules are stale: run `sparkwatch rules build`"
    )


def test_promtool_check_rules_is_clean(promtool: str) -> None:
    output = promtool_run(promtool, "check", "rules", *RULE_FILES)
    assert "SUCCESS" in output and "WARNING" not in output.upper()


def test_promtool_unit_tests_pass(promtool: str) -> None:
    output = promtool_run(promtool, "test", "rules", *TEST_FILES, cwd=PACKAGE_DIR)
    assert output.count("SUCCESS") == len(TEST_FILES)


def test_every_alert_has_a_firing_and_a_silent_case_with_a_boundary() -> None:
    tests = yaml.safe_load((PACKAGE_DIR / ALERTS_TEST).read_text())["tests"]
    for rule in committed_alert_rules():
        name = rule["alert"]
        groups = [g for g in tests if g["name"].startswith(f"{name}: ")]
        firing = [g for g in groups if any(c["exp_alerts"] for c in g["alert_rule_test"])]
        silent = [g for g in groups if not any(c["exp_alerts"] for c in g["alert_rule_test"])]
        assert firing and silent, name
        for group in firing:
            checks = group["alert_rule_test"]
            first = next(i for i, c in enumerate(checks) if c["exp_alerts"])
            if first > 0:  # nothing one minute before the firing minute
                before, at = checks[first - 1], checks[first]
                assert not before["exp_alerts"]
                assert int(at["eval_time"][:-1]) - int(before["eval_time"][:-1]) == 1, group


def test_every_alert_has_severity_summary_description_and_a_runbook_section() -> None:
    runbooks = RUNBOOKS.read_text()
    sections = {m.group(1): m.start() for m in re.finditer(r"^## (\w+)$", runbooks, re.M)}
    for rule in committed_alert_rules():
        name, notes = rule["alert"], rule["annotations"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info")
        assert notes["summary"] and len(notes["description"]) > 80
        assert notes["runbook_url"].endswith(f"docs/runbooks.md#{name.lower()}")
        assert name in sections, f"docs/runbooks.md has no section for {name}"
        body = runbooks[sections[name] :].split("\n## ", 1)[0]
        for part in (
            "**What it means.**",
            "**How to confirm.**",
            "**How to fix.**",
            "**Spark settings.**",
        ):
            assert part in body, f"{name}: runbook lacks {part}"


def catalogue_series() -> set[str]:
    names = {m.name for m in cat.ALL}
    for m in cat.ALL:
        if m.kind is cat.Kind.HISTOGRAM:
            names |= {m.name + s for s in ("_bucket", "_sum", "_count")}
    return names


def test_rules_only_use_catalogue_names_and_defined_recordings() -> None:
    config = load_config()
    exprs = [r.expr for r in recordings(config)] + [a.expr for a in build_alerts(config)]
    used = {n for e in exprs for n in re.findall(r"\bspark_streaming_\w+", e)}
    assert used and used <= catalogue_series(), used - catalogue_series()
    records = {r.record for r in recordings(config)}
    assert all(r.startswith(("sparkwatch_query:", "sparkwatch_operator:")) for r in records)


def test_overrides_change_thresholds_windows_and_disable_alerts(tmp_path: Path) -> None:
    override = tmp_path / "values.yaml"
    override.write_text("alerts:\n  query_failed:\n    enabled: false\n")
    config = load_config(
        files=[override],
        sets=[
            "alerts.watermark_lag.max_seconds=60",
            "alerts.state_unbounded.window=2h",
            "extra_labels.team=data",
        ],
    )
    alerts = {a.name: a for a in build_alerts(config)}
    assert "SparkStreamingQueryFailed" not in alerts
    assert alerts["SparkStreamingWatermarkLagHigh"].expr.endswith("> 60")
    assert "[2h]" in alerts["SparkStreamingStateUnbounded"].expr
    assert alerts["SparkStreamingStateUnbounded"].rule(config)["labels"]["team"] == "data"
    assert not any("SparkStreamingQueryFailed" in text for text in rule_files(config).values())


def test_per_query_trigger_intervals_become_their_own_branches() -> None:
    # A name with a dot cannot go through --set (its path): a YAML file or a mapping can.
    per_query = {"orders": 10, "a.b": 5}
    config = load_config(overrides={"alerts": {"batch_duration": {"per_query": per_query}}})
    (alert,) = [a for a in build_alerts(config) if a.config.key == "batch_duration"]
    assert 'query_name="orders"' in alert.expr and "> 10" in alert.expr
    assert 'query_name!~"orders|a\\\\.b"' in alert.expr and "> 60" in alert.expr


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["alerts.nope.for=1m"], "unknown key alerts.nope"),
        (["alerts.watermark_lag.max_seconds=soon"], "must be a number"),
        (["alerts.watermark_lag.for=15 minutes"], "not a Prometheus duration"),
        (["alerts.query_failed.severity=page"], "severity must be one of"),
        (["alerts.query_failed.enabled=1"], "must be true or false"),
        (["selector"], "expected KEY.PATH=VALUE"),
    ],
)
def test_bad_overrides_are_refused(sets: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(sets=sets)


def test_generated_promtool_tests_follow_an_overridden_config(
    promtool: str, tmp_path: Path
) -> None:
    config = load_config(
        sets=[
            "alerts.watermark_lag.max_seconds=3600",
            "alerts.state_unbounded.window=2h",
            "alerts.state_unbounded.for=1h",
            "alerts.query_stalled.max_silence_seconds=300",
            "alerts.query_failed.window=30m",
            "alerts.batch_duration.per_query.orders=10",
            "alerts.rows_dropped_by_watermark.max_ratio=0.05",
        ]
    )
    write(rule_files(config), tmp_path)
    promtool_run(promtool, "test", "rules", ALERTS_TEST, RECORDING_TEST, cwd=tmp_path)


def test_rules_build_check_detects_drift_and_build_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["rules", "build", "--output", str(tmp_path)]
    assert main([*out, "--check"]) == 1
    assert "regenerate with `sparkwatch rules build`" in capsys.readouterr().err
    assert main(out) == 0
    assert main([*out, "--check"]) == 0
    leftover = tmp_path / "generated" / "prometheus" / "old-rules.yaml"
    leftover.write_text("groups: []\n")
    alerts = tmp_path / rulefiles.ALERTS_FILE
    alerts.write_text(alerts.read_text().replace("> 1800", "> 1700"))
    assert main([*out, "--check"]) == 1
    err = capsys.readouterr().err
    assert "old-rules.yaml" in err and "sparkwatch-alerts.yaml" in err
    assert main(out) == 0 and not leftover.exists()


def test_committed_rules_pass_the_cli_check() -> None:
    assert main(["rules", "build", "--check"]) == 0


def test_a_bad_override_is_a_one_line_cli_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "build", "--check", "--set", "alerts.nope=1"]) == 2
    assert "unknown key alerts.nope" in capsys.readouterr().err


def test_an_alert_of_a_query_scraped_from_two_targets_fires_once_and_keeps_its_tenant(
    promtool: str, tmp_path: Path
) -> None:
    """The generated cases run every firing case again with its series scraped from the driver
    and from the collector (tenant "default"); here a collector tenant's query fires once, with
    its tenant, beside the default tenant's query of the same name scraped from its driver."""
    query = 'app_name="shop", query_name="orders", query_id="q1"'
    rules = tmp_path / "rules.yaml"
    rules.write_text((PACKAGE_DIR / rulefiles.ALERTS_FILE).read_text())
    lag = cat.QUERY_WATERMARK_LAG.name
    tenant_a = f'{lag}{{{query}, app_id="a1", tenant="team-a", job="collector", instance="c0"}}'
    tenant_a_again = tenant_a.replace('instance="c0"', 'instance="c1"')  # a second replica
    driver = f'{lag}{{{query}, app_id="d1", job="driver", instance="d0"}}'
    fired = {"severity": "warning", "app_name": "shop", "query_name": "orders", "query_id": "q1"}
    (rule,) = [r for r in committed_alert_rules() if r["alert"] == "SparkStreamingWatermarkLagHigh"]

    def expected(labels: dict[str, str]) -> dict[str, Any]:
        annotations = {k: render(v, labels) for k, v in rule["annotations"].items()}
        return {"exp_labels": labels, "exp_annotations": annotations}

    tests = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": s, "values": "7200x30"}
                         for s in (tenant_a, tenant_a_again, driver)],
        "alert_rule_test": [{"eval_time": "20m", "alertname": "SparkStreamingWatermarkLagHigh",
                             "exp_alerts": [
                                 expected({**fired, "app_id": "a1", "tenant": "team-a"}),
                                 expected({**fired, "app_id": "d1", "tenant": "default"}),
                             ]}],
    }]}
    path = tmp_path / "tenants.test.yaml"
    path.write_text(yaml.safe_dump(tests))
    assert "SUCCESS" in promtool_run(promtool, "test", "rules", path)
