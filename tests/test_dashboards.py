"""The Grafana dashboards: committed JSON and docs equal the build, stable uids, variables,
described panels, catalogue names only, PromQL that promtool parses, thresholds from config."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sparkwatch.cli.main import main
from sparkwatch.dashboards.build import DOCS_FILE, GRAFANA_DIR, dashboard_files, dashboards
from sparkwatch.dashboards.config import load_config
from sparkwatch.dashboards.docs import panels_in_order, target_text
from sparkwatch.dashboards.files import PACKAGE_DIR, stale
from sparkwatch.dashboards.recording import recordings
from sparkwatch.history.schema import metadata
from sparkwatch.metrics import catalogue as cat
from tests.test_dashboards_support import dashboard_targets, promql_for_test
from tests.test_rules import catalogue_series

UIDS = {
    "sparkwatch-overview",
    "sparkwatch-state-store",
    "sparkwatch-watermark",
    "sparkwatch-history",
    "sparkwatch-history-sqlite",
}
SQL_DATASOURCES = {
    "sparkwatch-history": "grafana-postgresql-datasource",
    "sparkwatch-history-sqlite": "frser-sqlite-datasource",
}
VARIABLES = ["datasource", "app", "query", "operator"]


@pytest.fixture(scope="module")
def boards() -> dict[str, dict[str, Any]]:
    return dashboards(load_config())


def test_committed_dashboards_and_docs_equal_the_build() -> None:
    assert stale(dashboard_files(load_config()), PACKAGE_DIR) == [], (
        "generated dashboards or docs/dashboards.md are stale: run `sparkwatch dashboards build`"
    )


def test_committed_files_pass_the_cli_check() -> None:
    assert main(["dashboards", "build", "--check"]) == 0


def test_uids_are_stable_and_grafana_11_schema(boards: dict[str, dict[str, Any]]) -> None:
    assert {b["uid"] for b in boards.values()} == UIDS
    for board in boards.values():
        assert board["schemaVersion"] >= 39  # Grafana 11
        assert board["title"].startswith("sparkwatch / ")
        ids = [p["id"] for p in board["panels"]]
        assert len(ids) == len(set(ids))


def test_every_dashboard_has_its_variables(boards: dict[str, dict[str, Any]]) -> None:
    for board in boards.values():
        variables = {v["name"]: v for v in board["templating"]["list"]}
        sql = "history" in board["uid"]
        # the collector labels its series by tenant; the SQL history's runs are read per app
        expected_names = VARIABLES if sql else [VARIABLES[0], "tenant", *VARIABLES[1:]]
        assert list(variables) == expected_names, board["uid"]
        expected = SQL_DATASOURCES.get(board["uid"], "prometheus")
        assert variables["datasource"]["query"] == expected
        for name in expected_names[1:]:
            assert variables[name]["multi"] and variables[name]["includeAll"]
            assert variables[name]["datasource"]["uid"] == "${datasource}"


def test_the_tenant_variable_narrows_the_app_choices_and_every_prometheus_query(
    boards: dict[str, dict[str, Any]],
) -> None:
    for board in boards.values():
        if "history" in board["uid"]:
            continue
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["tenant"]["allValue"] == ".*"
        assert 'tenant=~"$tenant"' in str(variables["app"]["query"])
        for _, panel in panels_in_order(board):
            for target in panel.get("targets", []):
                expr = target.get("expr", "")
                if 'app_name=~"$app"' in expr:
                    assert 'tenant=~"$tenant"' in expr, (board["uid"], expr)


def test_every_panel_is_described_and_queries_its_datasource(
    boards: dict[str, dict[str, Any]],
) -> None:
    for board in boards.values():
        sql = "history" in board["uid"]
        for _, panel in panels_in_order(board):
            where = f"{board['uid']} / {panel['title']}"
            assert len(panel.get("description", "")) >= 60, where
            assert panel["targets"], where
            assert panel["datasource"]["uid"] == "${datasource}", where
            for target in panel["targets"]:
                assert (target_text(target)[0] == "sql") == sql, where
                if sql:
                    assert target["datasource"]["type"] == panel["datasource"]["type"], where


def test_promql_uses_catalogue_names_and_defined_recordings(
    boards: dict[str, dict[str, Any]],
) -> None:
    exprs = [t.text for t in dashboard_targets(boards) if t.language == "promql"]
    recorded_names = re.compile(r"\bsparkwatch_\w+:[\w:]+")  # they embed a catalogue name
    raw = {
        n for e in exprs for n in re.findall(r"\bspark_streaming_\w+", recorded_names.sub("", e))
    }
    assert raw <= catalogue_series(), raw - catalogue_series()
    recorded = {n for e in exprs for n in recorded_names.findall(e)}
    assert recorded and recorded <= {r.record for r in recordings(load_config())}


@pytest.mark.parametrize(("profile", "at_least"), [("default", 7), ("full", 21)])
def test_operator_legends_name_the_operator_identity(profile: str, at_least: int) -> None:
    legends = [
        (f"{board['uid']} / {panel['title']}", target)
        for board in dashboards(load_config(overrides={"metrics_profile": profile})).values()
        for _, panel in panels_in_order(board)
        for target in panel.get("targets", [])
        if "{{operator_index}}" in target.get("legendFormat", "")
    ]
    assert len(legends) >= at_least
    for where, target in legends:
        assert "{{kind}}" in target["legendFormat"], where
        assert re.search(
            rf"group_left \(kind\b.*\n.*\b{cat.STATE_OPERATOR_INFO.name}\{{", target["expr"]
        ), where


def test_promtool_parses_every_dashboard_expression(
    boards: dict[str, dict[str, Any]], promtool: str, tmp_path: Path
) -> None:
    # promtool has no "check expression": each expression becomes a recording rule to check.
    targets = [t for t in dashboard_targets(boards) if t.language == "promql"]
    rules = [
        {"record": f"check:expr_{i}", "expr": promql_for_test(t.text)}
        for i, t in enumerate(targets)
    ]
    path = tmp_path / "exprs.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    done = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_sql_reads_only_history_tables(boards: dict[str, dict[str, Any]]) -> None:
    sql = [t.text for t in dashboard_targets(boards) if t.language == "sql"]
    variables = [
        v["query"]
        for b in boards.values()
        if "history" in b["uid"]
        for v in b["templating"]["list"]
        if v["type"] == "query"
    ]
    tables = {
        m
        for text in sql + variables
        for m in set(re.findall(r"\b(?:FROM|JOIN)\s+(?:LATERAL\s+)?([a-z_]\w*)", text))
        - common_table_expressions(text)
    }
    assert tables and tables <= set(metadata.tables), tables - set(metadata.tables)
    assert {"query_rollups", "operator_rollups"} <= tables


def common_table_expressions(sql: str) -> set[str]:
    """Names a statement defines itself (``WITH name AS (``, ``, name AS [MATERIALIZED] (``)."""
    return set(re.findall(r"(?:\bWITH|,)\s*([a-z_]\w*)\s+AS\s+(?:(?:NOT\s+)?MATERIALIZED\s+)?\(",
                          sql))


def test_committed_sqlite_history_dashboard_equals_the_build() -> None:
    path = f"{GRAFANA_DIR}/sparkwatch-history-sqlite.json"
    built = dashboard_files(load_config(), with_docs=False)[path]
    assert (PACKAGE_DIR / path).read_text(encoding="utf-8") == built, (
        "run `sparkwatch dashboards build`"
    )


def _without_queries(panel: dict[str, Any]) -> dict[str, Any]:
    """A panel with what may differ between the history backends taken out."""
    out = {k: v for k, v in panel.items() if k not in ("datasource", "targets")}
    if "panels" in out:
        out["panels"] = [_without_queries(p) for p in out["panels"]]
    return out


def test_sqlite_and_postgresql_history_have_the_same_panels_only_datasource_and_sql_differ(
    boards: dict[str, dict[str, Any]],
) -> None:
    pg, lite = boards["sparkwatch-history.json"], boards["sparkwatch-history-sqlite.json"]
    assert [_without_queries(p) for p in lite["panels"]] == [
        _without_queries(p) for p in pg["panels"]
    ]
    assert [(p["id"], p["title"], p["gridPos"]) for p in lite["panels"]] == [
        (p["id"], p["title"], p["gridPos"]) for p in pg["panels"]
    ]
    pg_targets = [t for _, p in panels_in_order(pg) for t in p["targets"]]
    lite_targets = [t for _, p in panels_in_order(lite) for t in p["targets"]]
    assert len(lite_targets) == len(pg_targets) == 9
    for pg_target, lite_target in zip(pg_targets, lite_targets, strict=True):
        assert lite_target["refId"] == pg_target["refId"]
        assert lite_target["queryType"] == pg_target["format"].replace("_", " ")
        assert lite_target["datasource"] == {"type": "frser-sqlite-datasource",
                                             "uid": "${datasource}"}
    names = [v["name"] for v in lite["templating"]["list"]]
    assert names == [v["name"] for v in pg["templating"]["list"]] == VARIABLES
    assert {k: v for k, v in lite.items() if k not in ("panels", "templating")} == {
        **{k: v for k, v in pg.items() if k not in ("panels", "templating")},
        "uid": "sparkwatch-history-sqlite",
        "title": "sparkwatch / History (SQLite)",
        "description": lite["description"],
    }


def test_threshold_lines_come_from_the_config() -> None:
    config = load_config(sets=["alerts.watermark_lag.max_seconds=123"])
    (board,) = [b for b in dashboards(config).values() if b["uid"] == "sparkwatch-watermark"]
    (panel,) = [p for _, p in panels_in_order(board) if p["title"] == "Watermark lag"]
    steps = panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, 123]


def test_docs_list_every_panel_with_its_queries(boards: dict[str, dict[str, Any]]) -> None:
    docs = (PACKAGE_DIR / DOCS_FILE).read_text()
    for board in boards.values():
        assert f"uid `{board['uid']}`" in docs
    for target in dashboard_targets(boards):
        assert f"#### {target.panel}\n" in docs, target.where
        assert target.text in docs, target.where


def test_dashboards_build_check_detects_drift_and_build_fixes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["dashboards", "build", "--output", str(tmp_path)]
    assert main([*out, "--check"]) == 1
    assert main(out) == 0 and main([*out, "--check"]) == 0
    overview = tmp_path / GRAFANA_DIR / "sparkwatch-overview.json"
    data = json.loads(overview.read_text())
    data["uid"] = "changed"
    overview.write_text(json.dumps(data))
    capsys.readouterr()
    assert main([*out, "--check"]) == 1
    assert "sparkwatch-overview.json" in capsys.readouterr().err
