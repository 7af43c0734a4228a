"""The config's ``selector`` narrows the dashboards as it narrows the rules: every raw series a
panel or a variable reads carries its matchers (it scoped the rules only, and the raw-metric
panels showed every scraped job); recording-rule series and ALERTS stay as built, and promtool
parses every scoped expression. Prometheus itself answering them: tests/test_dashboards_e2e.py."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkwatch.dashboards.build import dashboards
from sparkwatch.dashboards.config import load_config
from sparkwatch.dashboards.scope import scope_promql
from tests.test_dashboards_support import dashboard_targets, promql_for_test, variable_queries

SELECTOR = 'job="spark-drivers", namespace=~"etl|ml"'

SERIES = re.compile(r'(?<![\w:"])([A-Za-z_]\w*)\{([^}]*)\}')
"""A series selector whose name has no colon (a recording rule's has): ``name{matchers}``."""


def promql_texts(boards: dict[str, dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every Prometheus target and variable of ``boards``, in build order."""
    for target in dashboard_targets(boards):
        if target.language == "promql":
            yield target.where, target.text
    for board in boards.values():
        if not board["uid"].startswith("sparkwatch-history"):
            for name, query in variable_queries(board):
                if query.startswith("label_values("):
                    yield f"{board['uid']} / ${name}", query


@pytest.fixture(scope="module")
def built() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The default build's PromQL and the build with SELECTOR, side by side."""
    default = list(promql_texts(dashboards(load_config())))
    scoped = list(promql_texts(dashboards(load_config(overrides={"selector": SELECTOR}))))
    return default, scoped


def test_every_raw_series_of_every_panel_and_variable_starts_with_the_selector(
    built: tuple[list[tuple[str, str]], list[tuple[str, str]]],
) -> None:
    default, scoped = built
    assert [where for where, _ in scoped] == [where for where, _ in default]
    raw = 0
    for where, text in scoped:
        for name, matchers in SERIES.findall(text):
            if name.startswith("ALERTS"):
                assert not matchers.startswith(SELECTOR), (where, text)
                continue
            raw += 1
            assert matchers.startswith(SELECTOR), (where, name, text)
            assert matchers.count(SELECTOR) == 1, (where, text)  # once, not once per pass
    assert raw > 60  # the default profile's boards read raw series in over 60 places


def test_the_tenant_variable_reads_only_the_selected_series(
    built: tuple[list[tuple[str, str]], list[tuple[str, str]]],
) -> None:
    tenants = {text for where, text in built[1] if where.endswith("/ $tenant")}
    assert tenants == {f"label_values(spark_streaming_query_info{{{SELECTOR}}}, tenant)"}


def test_recording_rule_series_and_alerts_are_read_as_built(
    built: tuple[list[tuple[str, str]], list[tuple[str, str]]],
) -> None:
    """The rules built with the selector read only its series already, and their output keeps
    none of the labels it names: matching it there would find nothing."""
    recorded = re.compile(r"\bsparkwatch_\w+:[\w:]+\{[^}]*\}|\bALERTS\w*\{[^}]*\}")
    default, scoped = built
    pairs = [(recorded.findall(d), recorded.findall(s))
             for (_, d), (_, s) in zip(default, scoped, strict=True)]
    assert sum(len(d) for d, _ in pairs) > 10
    assert all(d == s for d, s in pairs)


def test_an_empty_selector_leaves_the_promql_byte_for_byte() -> None:
    text = 'max by (app_id) (spark_streaming_state_rows{tenant=~"$tenant"}) + ALERTS{a="b"}'
    assert scope_promql(text, 'job="j"') == (
        'max by (app_id) (spark_streaming_state_rows{job="j", tenant=~"$tenant"}) + ALERTS{a="b"}')
    assert dashboards(load_config(overrides={"selector": ""})) == dashboards(load_config())


def test_series_without_matchers_and_bare_label_values_get_the_selector() -> None:
    assert scope_promql("rate(x{}[5m]) / y", 'job="j"') == 'rate(x{job="j"}[5m]) / y'
    assert scope_promql("label_values(x, app)", 'job="j"') == 'label_values(x{job="j"}, app)'


def test_promtool_parses_every_scoped_expression(
    built: tuple[list[tuple[str, str]], list[tuple[str, str]]], promtool: str, tmp_path: Path
) -> None:
    exprs = [promql_for_test(text) for where, text in built[1] if "$" not in where]
    rules = [{"record": f"check:expr_{i}", "expr": expr} for i, expr in enumerate(exprs)]
    path = tmp_path / "scoped.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "scoped", "rules": rules}]}))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
