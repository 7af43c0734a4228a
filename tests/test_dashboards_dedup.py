"""A query scraped twice, through the collector (tenant="default") and straight from its driver
(no tenant), shows on every dashboard panel exactly as a query scraped once.

promtool evaluates each Prometheus panel expression (variables at All, but for the app) with the
rule files loaded, over the same synthetic series for two apps: "solo" exported by its driver
only, "dup" by both sources. The panel's result for "dup", relabelled as "solo", must equal its
result for "solo": same series, same values (twice the rows, or a second line, is a bug).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkwatch.dashboards.build import dashboards
from sparkwatch.dashboards.config import load_config
from sparkwatch.dashboards.files import write
from sparkwatch.dashboards.rulefiles import ALERTS_FILE, RECORDING_FILE, render
from sparkwatch.metrics import catalogue as cat
from tests.test_dashboards_support import dashboard_targets

SOURCES = {
    "collector": {"job": "sparkwatch", "instance": "collector:9751", "tenant": "default"},
    "driver": {"job": "spark-drivers", "instance": "10.0.0.7:4040"},
}
APPS = {"solo": ("driver",), "dup": ("collector", "driver")}
SAMPLES = 70
EVAL_MINUTE = 60
INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
# Fixed values where the panels compare them (an active, running query); the rest count up.
FIXED = {cat.QUERY_ACTIVE.name: "1", cat.QUERY_IDLE.name: "0", cat.QUERY_FAILED.name: "0",
         cat.QUERY_STALLED.name: "0"}
SPECIAL_LABELS = {"operator_index": "0", "source_index": "0", "phase": "addBatch",
                  "trigger": "processing_time"}


def label_values(metric: cat.MetricDef, app: str) -> dict[str, str]:
    values = {"app_name": app, "app_id": f"app-{app}", "query_id": "q1", "query_name": "agg"}
    return {k: values.get(k, SPECIAL_LABELS.get(k, f"{k}-1")) for k in metric.labels}


def input_series() -> list[dict[str, str]]:
    n = SAMPLES
    out = []
    for app, sources in APPS.items():
        for source in sources:
            for metric in cat.ALL:
                labels = {**label_values(metric, app), **SOURCES[source]}
                for suffix, extra, values in _samples(metric, n):
                    pairs = ", ".join(f'{k}="{v}"' for k, v in {**labels, **extra}.items())
                    out.append({"series": f"{metric.name}{suffix}{{{pairs}}}", "values": values})
    return out


def _samples(metric: cat.MetricDef, n: int) -> list[tuple[str, dict[str, str], str]]:
    if metric.kind is cat.Kind.HISTOGRAM:
        buckets = [("1", 2), ("10", 8), ("+Inf", 10)]
        return [("_bucket", {"le": le}, f"0+{k}x{n}") for le, k in buckets] + [
            ("_sum", {}, f"0+30x{n}"),
            ("_count", {}, f"0+10x{n}"),
        ]
    if metric.kind is cat.Kind.INFO:
        return [("", {}, f"1x{n}")]
    if metric.kind is cat.Kind.COUNTER:
        return [("", {}, f"0+60x{n}")]
    return [("", {}, f"{FIXED[metric.name]}x{n}" if metric.name in FIXED else f"100+1x{n}")]


def for_app(expr: str, app: str) -> str:
    expr = expr.replace("$app", app)
    for macro, value in INTERVALS.items():
        expr = expr.replace(macro, value)
    return re.sub(r"\$(tenant|query|operator)\b", ".*", expr)


def as_solo(expr: str) -> str:
    renamed = f'label_replace(({expr}), "app_name", "solo", "app_name", "dup")'
    return f'label_replace({renamed}, "app_id", "app-solo", "app_id", "app-dup")'


def checks(where: str, expr: str) -> list[dict[str, Any]]:
    """The comparisons, each led by a PromQL comment naming the panel (promtool prints it)."""
    solo, dup = f"({for_app(expr, 'solo')})", as_solo(for_app(expr, "dup"))
    at, one = f"{EVAL_MINUTE}m", [{"labels": "{}", "value": 1}]
    return [
        # as many series (and at least one: the panel has data)...
        {"expr": f"# {where}\ncount({dup}) == bool count({solo})", "eval_time": at,
         "exp_samples": one},
        # ...each with the same labels and value
        {"expr": f"# {where}\ncount({dup} == {solo}) == bool count({solo})", "eval_time": at,
         "exp_samples": one},
    ]


@pytest.mark.parametrize("profile", ["default", "full"])
def test_a_query_scraped_through_the_collector_and_its_driver_is_counted_once(
    profile: str, promtool: str, tmp_path: Path
) -> None:
    config = load_config(sets=[f"metrics_profile={profile}"])
    write(render(config), tmp_path)
    targets = [t for t in dashboard_targets(dashboards(config)) if t.language == "promql"]
    assert targets
    test = {
        "rule_files": [RECORDING_FILE, ALERTS_FILE],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": input_series(),
                "promql_expr_test": [c for t in targets for c in checks(t.where, t.text)],
            }
        ],
    }
    (tmp_path / "dedup.test.yaml").write_text(yaml.safe_dump(test, sort_keys=False, width=10**6))
    done = subprocess.run(
        [promtool, "test", "rules", "dedup.test.yaml"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False,
    )
    panels = sorted(set(re.findall(r'expr: "# (.*?)\\n', done.stdout + done.stderr)))
    assert done.returncode == 0, "\n".join(panels) or done.stdout[-5000:] + done.stderr
