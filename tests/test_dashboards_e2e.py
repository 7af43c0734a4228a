"""End to end: a real Prometheus scrapes a real local Spark app with the listener attached, and
every query of every dashboard panel and every rule returns data; the SQL panels return rows from
the real PostgreSQL history; the unbounded-state alert fires for an aggregation without watermark
and not for a watermarked one.

One scenario for the whole module (about a minute): three rate-source queries, light enough for
a shared 2-core machine, with 1 s triggers, scraped and evaluated every second:

- ``unbounded``: ``groupBy(value).count()``, no watermark, HDFS provider: state grows, nothing
  evicted;
- ``watermarked``: 2 s windows with a 2 s watermark, RocksDB (its window keys are read back, so
  the block cache is used): windows evicted continuously;
- ``failing``: ``assert_true(value < 3)``: fails on its first rows (exception in the history).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import sparkwatch
from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.alerts import build_alerts
from sparkwatch.dashboards.build import dashboards
from sparkwatch.dashboards.config import Config, load_config
from sparkwatch.dashboards.files import PACKAGE_DIR
from sparkwatch.dashboards.recording import ALERTING, FAILED, STATUS, recordings
from sparkwatch.metrics import catalogue as cat
from tests.support import create_database, drop_database, wait_for
from tests.test_dashboards_support import (
    Prometheus,
    Target,
    dashboard_targets,
    label_values_query,
    promql_for_test,
    sql_for_test,
    start_prometheus,
    variable_queries,
)
from tests.workloads import HDFS, ROCKSDB

pytestmark = [pytest.mark.spark, pytest.mark.postgres, pytest.mark.prometheus]

UNBOUNDED_WINDOW = 30  # seconds; the default is 1h, the config is made for such overrides
E2E_CONFIG = {
    "alerts": {
        "state_unbounded": {"window": f"{UNBOUNDED_WINDOW}s", "for": "5s", "min_rows": 0},
    }
}
UNBOUNDED_ALERT = "SparkStreamingStateUnbounded"

# What may return nothing in this listener-only, rate-source scenario, and why. A PromQL
# expression is exempt when every metric it reads is listed; a SQL query when it reads a listed
# table.
EMPTY_METRICS = {
    cat.SOURCE_MAX_BEHIND.name: "Kafka sources only (offsets behind latest); the test reads rate",
    cat.SOURCE_AVG_BEHIND.name: "Kafka sources only (offsets behind latest); the test reads rate",
    cat.QUERY_STALLED.name: "collector only (stall detection job); this scenario has no collector",
    cat.LISTENER_DELIVERY_FAILURES.name: "exported from the first failed delivery; none failed",
    "sparkwatch_collector_events_quarantined_total": "collector only; no collector here",
    "sparkwatch_collector_worker_last_progress_timestamp_seconds": "collector only; none here",
}
EMPTY_TABLES = {
    "query_stalls": "written by the collector's stall detection; this scenario has no collector",
}
RECORDED = re.compile(r"\bsparkwatch_\w+:[\w:]+")  # recording names embed catalogue names


@dataclass
class Scenario:
    prometheus: Prometheus
    attachment: Any
    history_url: str
    config: Config
    boards: dict[str, dict[str, Any]]
    started: datetime


def metrics_read(expr: str) -> set[str]:
    return set(re.findall(r"\b(?:spark_streaming|sparkwatch_collector)_\w+",
                          RECORDED.sub("", expr)))


def exempt(text: str) -> str | None:
    """Why ``text`` (PromQL or SQL) may return nothing here, or None."""
    for table, reason in EMPTY_TABLES.items():
        if re.search(rf"\b(?:FROM|JOIN)\s+{table}\b", text):
            return reason
    names = metrics_read(text)
    if names and names <= EMPTY_METRICS.keys():
        return EMPTY_METRICS[sorted(names)[0]]
    return None


def committed_boards() -> dict[str, dict[str, Any]]:
    directory = PACKAGE_DIR / "generated" / "grafana"
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def rate_stream(spark: Any, rows_per_second: int) -> Any:
    return (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rows_per_second)
        .option("numPartitions", 1)
        .load()
    )


def start_query(spark: Any, df: Any, name: str, mode: str, provider: str, root: Path) -> Any:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    try:
        return (
            df.writeStream.format("noop")
            .outputMode(mode)
            .queryName(name)
            .option("checkpointLocation", str(root / name))
            .trigger(processingTime="1 second")
            .start()
        )
    finally:
        spark.conf.unset("spark.sql.streaming.stateStore.providerClass")


def start_queries(spark: Any, root: Path) -> list[Any]:
    from pyspark.sql import functions as F

    windows = (
        rate_stream(spark, 10)
        .withWatermark("timestamp", "2 seconds")
        .groupBy(F.window("timestamp", "2 seconds"))
        .count()
    )
    return [
        start_query(
            spark,
            rate_stream(spark, 10).groupBy("value").count(),
            "unbounded",
            "update",
            HDFS,
            root,
        ),
        start_query(spark, windows, "watermarked", "append", ROCKSDB, root),
        start_query(
            spark,
            rate_stream(spark, 5).selectExpr("assert_true(value < 3) AS ok"),
            "failing",
            "append",
            HDFS,
            root,
        ),
    ]


def wait_until_steady(prom: Prometheus) -> None:
    """Enough batches for every rate window, the failure seen, evictions for a whole window."""
    batches = cat.QUERY_BATCHES.name
    wait_for(
        lambda: (
            prom.has(f'{batches}{{query_name=~"unbounded|watermarked"}} >= 8')
            and len(prom.query(f'{batches}{{query_name=~"unbounded|watermarked"}} >= 8')) == 2
        ),
        120,
        "8 batches of both stateful queries in Prometheus",
    )
    wait_for(
        lambda: prom.has(f'{cat.QUERY_FAILED.name}{{query_name="failing"}} == 1'),
        60,
        "the failing query to fail",
    )
    # The watermarked query evicted in every sample of the last window: no window without
    # removals is left in the range the unbounded-state rule looks at.
    removed = cat.STATE_ROWS_REMOVED.name
    wait_for(
        lambda: prom.has(
            f'min_over_time({removed}{{query_name="watermarked"}}[{UNBOUNDED_WINDOW + 2}s]) > 0'
        ),
        90,
        "the watermarked query to evict for a whole window",
    )
    wait_for(
        lambda: prom.has(
            f'ALERTS{{alertname="{UNBOUNDED_ALERT}", alertstate="firing", query_name="unbounded"}}'
        ),
        60,
        "the unbounded-state alert to fire",
    )


@pytest.fixture(scope="module")
def scenario(
    spark: Any, pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    import sqlalchemy as sa

    root = tmp_path_factory.mktemp("dashboards_e2e")
    database = create_database(pg_admin_url)
    url = sa.engine.make_url(pg_admin_url).set(database=database).render_as_string(False)
    config = load_config(overrides=E2E_CONFIG)
    for relative, text in rulefiles.render(config).items():
        (root / Path(relative).name).write_text(text)
    rule_paths = [root / Path(r).name for r in (rulefiles.RECORDING_FILE, rulefiles.ALERTS_FILE)]
    # No collector: the listener's history writer keeps the rollups the History panels read.
    att = sparkwatch.attach(spark, metrics_port=0, history_url=url, history_rollup_seconds=1)
    prom, queries = None, []
    try:
        prom = start_prometheus(root, [f"127.0.0.1:{att.metrics_port}"], rule_paths)
        started = datetime.now(UTC)
        queries = start_queries(spark, root)
        wait_until_steady(prom)
        yield Scenario(prom, att, url, config, committed_boards(), started)
    finally:
        for query in queries:
            query.stop()
        att.detach()
        if prom is not None:
            prom.stop()
        drop_database(pg_admin_url, database)


def has_data(result: list[dict[str, Any]]) -> bool:
    """At least one sample that is a number (NaN, from 0/0, shows nothing in a panel)."""
    return any(sample["value"][1] != "NaN" for sample in result)


def check_returns_data(prom: Prometheus, items: list[tuple[str, str]]) -> list[str]:
    """(where, expr) pairs; returns the failures (no data and no exemption)."""
    failures = []
    for where, expr in items:
        if not has_data(prom.query(expr)) and exempt(expr) is None:
            failures.append(f"{where}: no data for\n{expr}")
    return failures


def test_every_dashboard_promql_expression_returns_data(scenario: Scenario) -> None:
    targets = [t for t in dashboard_targets(scenario.boards) if t.language == "promql"]
    assert len(targets) > 45  # the boards built for the default metric profile
    items = [(t.where, promql_for_test(t.text)) for t in targets]
    failures = check_returns_data(scenario.prometheus, items)
    assert not failures, "\n\n".join(failures)


def test_operator_legends_show_the_identity_from_the_plan(scenario: Scenario) -> None:
    target = next(t for t in dashboard_targets(scenario.boards) if t.panel == "State rows")
    series = scenario.prometheus.query(promql_for_test(target.text))
    labels = {s["metric"]["query_name"]: s["metric"] for s in series}
    assert labels.keys() == {"unbounded", "watermarked"}, labels
    assert all(m["source"] == "plan" and m["kind"] for m in labels.values()), labels
    assert "value" in labels["unbounded"]["keys"], labels
    assert "watermark_column" not in labels["unbounded"], labels  # empty labels are dropped
    assert "timestamp" in labels["watermarked"]["watermark_column"], labels


def test_every_prometheus_variable_has_values(scenario: Scenario) -> None:
    for board in scenario.boards.values():
        if board["uid"].startswith("sparkwatch-history"):  # SQL variables (PG and SQLite)
            continue
        for name, query in variable_queries(board):
            if name == "tenant":  # a driver's own /metrics has no tenant label: no choices
                continue
            selector, label = label_values_query(promql_for_test(query))
            values = scenario.prometheus.api(f"label/{label}/values", **{"match[]": selector})
            assert values, f"{board['uid']} variable {name}: no values for {query}"


def test_every_recording_rule_returns_data_and_every_rule_evaluates_cleanly(
    scenario: Scenario,
) -> None:
    prom = scenario.prometheus
    rules = recordings(scenario.config)
    failures = check_returns_data(prom, [(r.record, r.expr) for r in rules])
    failures += check_returns_data(prom, [(f"{r.record} (recorded)", r.record) for r in rules])
    assert not failures, "\n\n".join(failures)
    loaded = [rule for group in prom.api("rules")["groups"] for rule in group["rules"]]
    assert len(loaded) == len(rules) + len(build_alerts(scenario.config))
    unhealthy = [(r["name"], r.get("lastError")) for r in loaded if r["health"] != "ok"]
    assert not unhealthy


def test_every_alert_signal_returns_data_and_every_alert_expression_evaluates(
    scenario: Scenario,
) -> None:
    prom = scenario.prometheus
    items = []
    for alert in build_alerts(scenario.config):
        prom.query(alert.promql)  # raises on an invalid expression or a matching error
        items += [(f"{alert.name} signal", signal) for signal in alert.signals]
    failures = check_returns_data(prom, items)
    assert not failures, "\n\n".join(failures)


def test_unbounded_state_rule_is_true_without_watermark_and_false_with_one(
    scenario: Scenario,
) -> None:
    prom = scenario.prometheus
    (alert,) = [a for a in build_alerts(scenario.config) if a.name == UNBOUNDED_ALERT]
    flagged = {s["metric"]["query_name"] for s in prom.query(alert.promql)}
    assert "unbounded" in flagged and "watermarked" not in flagged
    # Never true for the watermarked query during the last 10 s either, nor pending/firing.
    # Judged where the window holds at least half its scrapes: the driver's /metrics can miss
    # its 1 s scrape timeout for a while on a loaded 2-core machine, and a window left with two
    # equal samples of the removals counter reads as "no evictions" (production windows are 1 h).
    removed = f'{cat.STATE_ROWS_REMOVED.name}{{query_name="watermarked"}}'
    sampled = f"count_over_time({removed}[{UNBOUNDED_WINDOW}s]) >= {UNBOUNDED_WINDOW // 2}"
    # The rule keeps the catalogue's labels only (one alert per operator, however many
    # targets scrape it): matched to the scrape's series on the operator's identity.
    recent = (f"count_over_time((({alert.promql}) and on (app_id, query_id, operator_index) "
              f"{sampled})[10s:1s])")
    flagged_recently = [s for s in prom.query(recent) if s["metric"]["query_name"] == "watermarked"]
    assert not flagged_recently, prom.query(f"{removed}[{UNBOUNDED_WINDOW + 15}s]")
    assert not prom.query(f'ALERTS{{alertname="{UNBOUNDED_ALERT}", query_name="watermarked"}}')


def test_query_status_shows_the_failed_and_the_alerting_query(scenario: Scenario) -> None:
    def status() -> dict[str, float]:
        result = scenario.prometheus.query(STATUS)
        return {s["metric"]["query_name"]: float(s["value"][1]) for s in result}

    # The status rule reads ALERTS of the previous evaluation: allow it a few evaluations.
    wait_for(lambda: status().get("unbounded") == ALERTING, 15, "the unbounded query's status")
    assert status()["failing"] == FAILED
    assert scenario.prometheus.has(
        'ALERTS{alertname="SparkStreamingQueryFailed", alertstate="firing", query_name="failing"}'
    )


def history_values(conn: Any, board: dict[str, Any], start: datetime, end: datetime) -> dict:
    """Run the History variables' queries in order, each choice at All (every value)."""
    import sqlalchemy as sa

    chosen: dict[str, list[str]] = {}
    for name, query in variable_queries(board):
        rows = conn.execute(sa.text(sql_for_test(query, chosen, start, end))).all()
        chosen[name] = [str(r[0]) for r in rows]
        assert chosen[name], f"History variable {name}: no values"
    return chosen


def test_every_history_sql_query_returns_rows_from_postgresql(scenario: Scenario) -> None:
    import sqlalchemy as sa

    assert scenario.attachment.flush(30)
    (board,) = [b for b in scenario.boards.values() if b["uid"] == "sparkwatch-history"]
    start, end = scenario.started - timedelta(minutes=5), datetime.now(UTC) + timedelta(minutes=5)
    engine = sa.create_engine(scenario.history_url)
    failures = []

    def rolled_up(table: str) -> bool:
        with engine.connect() as conn:
            return conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one() > 0

    for table in ("query_rollups", "operator_rollups"):
        wait_for(lambda t=table: rolled_up(t), 30, f"the listener's {table}")
    try:
        with engine.connect() as conn:
            chosen = history_values(conn, board, start, end)
            assert {"unbounded", "watermarked", "failing"} <= set(chosen["query"])
            targets: list[Target] = [t for t in dashboard_targets({"h": board})]
            assert len(targets) >= 8 and all(t.language == "sql" for t in targets)
            for t in targets:
                rows = conn.execute(sa.text(sql_for_test(t.text, chosen, start, end))).all()
                if not rows and exempt(t.text) is None:
                    failures.append(f"{t.where}: no rows for\n{t.text}")
            exceptions = conn.execute(
                sa.text("SELECT exception FROM query_runs WHERE name = 'failing'")
            ).scalar_one()
    finally:
        engine.dispose()
    assert not failures, "\n\n".join(failures)
    assert "assert_true" in exceptions or "value < 3" in exceptions


def test_every_legitimately_empty_entry_is_used() -> None:
    texts = [t.text for t in dashboard_targets(committed_boards())]
    texts += [s for a in build_alerts(load_config()) for s in a.signals]
    for name in [*EMPTY_METRICS, *EMPTY_TABLES]:
        assert any(name in text and exempt(text) for text in texts), f"stale exemption: {name}"


def test_a_selector_on_the_scraped_job_keeps_every_panels_data_and_another_jobs_empties_them(
    scenario: Scenario,
) -> None:
    """The config's selector narrows the panels on raw series too (it narrowed the rules only):
    the job Prometheus scrapes here keeps every panel's data; another job's leaves each panel
    that reads only raw series without a series (a count's ``or vector(0)`` shows 0)."""
    def promql(job: str) -> list[Target]:
        boards = dashboards(load_config(overrides={"selector": f'job="{job}"'}))
        return [t for t in dashboard_targets(boards) if t.language == "promql"]

    kept = [(t.where, promql_for_test(t.text)) for t in promql("spark")]
    assert len(kept) > 45
    failures = check_returns_data(scenario.prometheus, kept)
    assert not failures, "\n\n".join(failures)
    raw_only = [t for t in promql("elsewhere")
                if not RECORDED.search(t.text) and "ALERTS" not in t.text]
    assert len(raw_only) > 30
    for target in raw_only:
        result = scenario.prometheus.query(promql_for_test(target.text))
        shown = [s for s in result if s["metric"] or s["value"][1] != "0"]
        assert not shown, f"{target.where}: {shown[:3]}"
