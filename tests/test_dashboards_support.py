"""Helpers of the dashboard tests: a real Prometheus in a temp dir, the dashboards' queries with
Grafana's variables and macros substituted; and tests of those helpers."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from bench.local import free_port
from sparkwatch.dashboards.docs import panels_in_order, target_text
from tests.conftest import unavailable
from tests.support import wait_for

# What Grafana would put in for a short time range with a 1 s scrape interval.
GRAFANA_INTERVALS = {"$__rate_interval": "30s", "$__interval": "5s", "$__range": "5m"}



def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        unavailable("prometheus not installed (apt-get install prometheus)")
    return str(path)


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as exc:  # 400/422: a bad expression, with the reason
            body = json.load(exc)
        if body.get("status") != "success":
            raise AssertionError(f"Prometheus {path} {params}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.api("query", query=expr)["result"]
        return result

    def has(self, expr: str) -> bool:
        return bool(self.query(expr))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_prometheus(
    directory: Path, targets: Sequence[str], rule_files: Sequence[Path]
) -> Prometheus:
    """Prometheus on a free localhost port, scraping and evaluating every second."""
    return run_prometheus(directory, {
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": "spark", "static_configs": [{"targets": list(targets)}]}],
    })


def run_prometheus(directory: Path, config: Mapping[str, Any]) -> Prometheus:
    """Prometheus on a free localhost port with ``config`` (scrape configs, rule files), scraping
    and evaluating every second."""
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, **config}
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    port, log = free_port(), directory / "prometheus.log"
    process = subprocess.Popen(
        [
            prometheus_binary(),
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_for(lambda: _ready(server), 30, "Prometheus to be ready")
    except AssertionError:
        server.stop()
        raise AssertionError(f"Prometheus did not start:\n{log.read_text()[-3000:]}") from None
    return server


def _ready(server: Prometheus) -> bool:
    if server.process.poll() is not None:
        raise AssertionError(f"Prometheus exited:\n{server.log.read_text()[-3000:]}")
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


@dataclass(frozen=True)
class Target:
    dashboard: str
    panel: str
    ref: str
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref}"


def dashboard_targets(boards: Mapping[str, Mapping[str, Any]]) -> Iterator[Target]:
    for board in boards.values():
        for _, panel in panels_in_order(board):
            for target in panel.get("targets", []):
                language, text = target_text(target)
                yield Target(board["uid"], panel["title"], target["refId"], language, text)


def variable_queries(board: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, query) of the board's query variables, in dependency (declaration) order."""
    return [
        (v["name"], str(v["query"]))
        for v in board["templating"]["list"]
        if v.get("type") == "query"
    ]


def promql_for_test(expr: str) -> str:
    """Grafana's interval macros filled in, the variables at *All* (``.*``)."""
    for macro, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(macro, value)
    return re.sub(r"\$(tenant|app|query|operator)\b", ".*", expr)


def sql_for_test(
    sql: str, variables: Mapping[str, Sequence[str]], start: datetime, end: datetime
) -> str:
    """Grafana's PostgreSQL macros and multi-value variables (quoted lists), as Grafana sends."""
    since, until = f"'{start.isoformat()}'", f"'{end.isoformat()}'"
    sql = re.sub(r"\$__timeFilter\(([^)]*)\)", rf"\1 BETWEEN {since} AND {until}", sql)
    sql = sql.replace("$__timeFrom()", since).replace("$__timeTo()", until)

    def values(match: re.Match[str]) -> str:
        chosen = variables[match.group(1)]
        return ", ".join("'" + v.replace("'", "''") + "'" for v in chosen) or "NULL"

    return re.sub(r"\$(app|query|operator)\b", values, sql)


def sqlite_for_test(
    sql: str, variables: Mapping[str, Sequence[str]], start: datetime, end: datetime
) -> str:
    """The text frser-sqlite-datasource runs: Grafana's frontend replaces ``$__from``/``$__to``
    (epoch milliseconds) and ``${var:sqlstring}`` (each value quoted, quotes doubled, joined by
    commas); the plugin's own macros (only ``$__unixEpochGroupSeconds``) are left alone, so any
    other ``$__name(...)`` would reach SQLite as a syntax error: refused here."""
    sql = sql.replace("$__from", str(int(start.timestamp() * 1000)))
    sql = sql.replace("$__to", str(int(end.timestamp() * 1000)))

    def values(match: re.Match[str]) -> str:
        return ",".join("'" + v.replace("'", "''") + "'" for v in variables[match.group(1)])

    sql = re.sub(r"\$\{(\w+):sqlstring\}", values, sql)
    assert "$" not in sql, f"not substituted for the SQLite plugin: {sql}"
    return sql


def label_values_query(query: str) -> tuple[str, str]:
    """``label_values(selector, label)`` -> (selector, label)."""
    match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query)
    assert match, f"not a label_values() query: {query}"
    return match.group(1), match.group(2)


# --- tests of the helpers -----------------------------------------------------------------------


def test_promql_for_test_fills_grafana_macros_and_selects_all() -> None:
    expr = 'rate(x{app_name=~"$app", query_name=~"$query"}[$__rate_interval])'
    assert promql_for_test(expr) == 'rate(x{app_name=~".*", query_name=~".*"}[30s])'


def test_sql_for_test_quotes_lists_and_expands_time_macros() -> None:
    start, end = datetime(2026, 1, 1), datetime(2026, 1, 2)
    sql = "SELECT 1 WHERE $__timeFilter(b.ts) AND a IN ($app) AND q IN ($query)"
    out = sql_for_test(sql, {"app": ["a", "it's"], "query": []}, start, end)
    assert out == (
        "SELECT 1 WHERE b.ts BETWEEN '2026-01-01T00:00:00' AND '2026-01-02T00:00:00' "
        "AND a IN ('a', 'it''s') AND q IN (NULL)"
    )


def test_sqlite_for_test_fills_epoch_milliseconds_and_sqlstring_lists() -> None:
    start, end = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    sql = "SELECT 1 WHERE t > $__from / 1000.0 AND t <= $__to AND a IN (${app:sqlstring})"
    out = sqlite_for_test(sql, {"app": ["a", "it's"]}, start, end)
    assert out == (
        "SELECT 1 WHERE t > 1767225600000 / 1000.0 AND t <= 1767312000000 AND a IN ('a','it''s')"
    )


def test_label_values_query_splits_selector_and_label() -> None:
    assert label_values_query('label_values(m{a=~"$app"}, query_name)') == (
        'm{a=~"$app"}',
        "query_name",
    )
