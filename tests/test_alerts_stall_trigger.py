"""The stalled-query alert and the "stalled" status allow each query the silence its own trigger
interval implies: a query triggered every 15 minutes is healthy between its events, and stalled
once it stays silent for several of its intervals (promtool over the committed rule files)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from sparkwatch.dashboards import recording, rulefiles
from sparkwatch.dashboards.config import load_config
from sparkwatch.dashboards.files import PACKAGE_DIR
from sparkwatch.dashboards.promtool_model import render

ALERT = "SparkStreamingQueryStalled"
QUERY = {"app_name": "orders", "app_id": "app-1", "query_id": "q1", "query_name": "hourly_agg"}
LABELS = ", ".join(f'{k}="{v}"' for k, v in QUERY.items())
TRIGGER = 900  # seconds: a 15-minute ProcessingTime trigger
MINUTES = 90


def stall_config() -> tuple[float, int]:
    """The global silence limit (seconds) and the alert's ``for`` (minutes) from the config."""
    c = load_config().alert("query_stalled")
    return c.param("max_silence_seconds"), int(c.seconds("for") // 60)


def trigger_intervals() -> float:
    """How many of its trigger intervals a query may stay silent (when above the limit)."""
    return float(load_config().alert("query_stalled").param("max_silence_trigger_intervals"))


def series(last_event: list[int], trigger: int | None) -> list[dict[str, str]]:
    n = len(last_event) - 1
    out = [
        {"series": f"spark_streaming_query_last_event_timestamp_seconds{{{LABELS}}}",
         "values": " ".join(map(str, last_event))},
        {"series": f"spark_streaming_query_start_time_seconds{{{LABELS}}}", "values": f"0x{n}"},
        {"series": f"spark_streaming_query_active{{{LABELS}}}", "values": f"1x{n}"},
        {"series": f"spark_streaming_query_idle{{{LABELS}}}", "values": f"0x{n}"},
        {"series": f"spark_streaming_query_failed{{{LABELS}}}", "values": f"0x{n}"},
    ]
    if trigger is not None:
        out.append({"series": f"spark_streaming_query_trigger_interval_seconds{{{LABELS}}}",
                    "values": f"{trigger}x{n}"})
    return out


def every_trigger(until_minute: int, trigger: int = TRIGGER) -> list[int]:
    """Last event timestamps (one sample a minute) of a query reporting 2 minutes after each
    trigger (its batch takes that long) until ``until_minute``, silent afterwards."""
    out, last = [], 0
    for minute in range(MINUTES + 1):
        t = minute * 60
        if minute <= until_minute and t >= 120 and (t - 120) % trigger == 0:
            last = t
        out.append(last)
    return out


def rule_annotations() -> dict[str, str]:
    """The committed rule's annotations as Prometheus fills them for QUERY."""
    rules = yaml.safe_load((PACKAGE_DIR / rulefiles.ALERTS_FILE).read_text())
    (rule,) = [r for g in rules["groups"] for r in g["rules"] if r.get("alert") == ALERT]
    return {k: render(v, QUERY) for k, v in rule["annotations"].items()}


def alert_checks(minutes: range | list[int], fire_from: int | None) -> list[dict[str, Any]]:
    # A driver's own series have no tenant: the rule names the default one (docs/runbooks.md).
    labels = {**QUERY, "tenant": "default", "severity": "critical"}
    expected = [{"exp_labels": labels, "exp_annotations": rule_annotations()}]
    return [
        {"eval_time": f"{m}m", "alertname": ALERT,
         "exp_alerts": expected if fire_from is not None and m >= fire_from else []}
        for m in minutes
    ]


def status_check(minute: int, code: int) -> dict[str, Any]:
    return {"expr": f'{recording.STATUS}{{query_id="q1"}}', "eval_time": f"{minute}m",
            "exp_samples": [{"labels": f"{recording.STATUS}{{{LABELS}}}", "value": code}]}


def run_promtool(promtool: str, tmp_path: Path, groups: list[dict[str, Any]]) -> None:
    files = [str(PACKAGE_DIR / rulefiles.RECORDING_FILE), str(PACKAGE_DIR / rulefiles.ALERTS_FILE)]
    test = {"rule_files": files, "evaluation_interval": "1m", "tests": groups}
    path = tmp_path / "stall.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr


def test_a_query_with_a_15_minute_trigger_reporting_each_trigger_is_never_stalled(
    promtool: str, tmp_path: Path
) -> None:
    limit, _ = stall_config()
    assert limit < TRIGGER  # the case the global limit alone gets wrong
    group = {
        "interval": "1m",
        "input_series": series(every_trigger(MINUTES), TRIGGER),
        "alert_rule_test": alert_checks(range(0, MINUTES + 1, 3), None),
        # 13 minutes after an event (780 s of silence, above the global 600 s): running.
        "promql_expr_test": [
            status_check(15, recording.RUNNING),
            status_check(60, recording.RUNNING),
        ],
    }
    run_promtool(promtool, tmp_path, [group])


def test_a_query_with_a_15_minute_trigger_that_stops_reporting_is_stalled_after_its_intervals(
    promtool: str, tmp_path: Path
) -> None:
    limit, for_minutes = stall_config()
    allowed = max(limit, trigger_intervals() * TRIGGER)
    last = 17 * 60  # the events at minutes 2 and 17, then nothing
    first_true = (last + int(allowed)) // 60 + 1  # silence > allowed
    fires = first_true + for_minutes
    assert fires < MINUTES
    group = {
        "interval": "1m",
        "input_series": series(every_trigger(17), TRIGGER),
        "alert_rule_test": alert_checks([first_true - 1, fires - 1, fires, MINUTES], fires),
        "promql_expr_test": [
            status_check(first_true - 1, recording.RUNNING),
            status_check(first_true, recording.STALLED),
        ],
    }
    run_promtool(promtool, tmp_path, [group])


def test_a_short_trigger_or_none_keeps_the_global_silence_limit(
    promtool: str, tmp_path: Path
) -> None:
    limit, for_minutes = stall_config()
    first_true = int(limit) // 60 + 1  # last event at 0: silence > limit
    fires = first_true + for_minutes
    stuck = [0] * (MINUTES + 1)
    groups = [
        {
            "interval": "1m",
            "input_series": series(stuck, trigger),
            "alert_rule_test": alert_checks([fires - 1, fires], fires),
            "promql_expr_test": [status_check(first_true - 1, recording.RUNNING),
                                 status_check(first_true, recording.STALLED)],
        }
        for trigger in (10, 0, None)  # 10 s, the default trigger (0: as fast as possible), none
    ]
    run_promtool(promtool, tmp_path, groups)
