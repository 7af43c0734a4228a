"""Metric profiles: the default stays within its series budget and holds exactly what the
generated dashboards and rules read; full is today's whole catalogue; allow and deny lists and
the histogram buckets change what /metrics serves; both pass ``promtool check metrics``."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from bench.fleet import Fleet
from sparkwatch.cli.collector import register
from sparkwatch.collector.config import SETTINGS, load_collector_settings
from sparkwatch.collector.stalls import StallBoard, StalledGauge
from sparkwatch.dashboards.alerts import build_alerts
from sparkwatch.dashboards.build import GRAFANA_DIR, dashboards
from sparkwatch.dashboards.config import load_config
from sparkwatch.dashboards.docs import panels_in_order
from sparkwatch.dashboards.files import PACKAGE_DIR
from sparkwatch.dashboards.recording import recordings
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.profiles import (
    EXTRAS,
    PROFILES,
    Selection,
    families_in,
    family_of,
    from_settings,
    select,
)
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.text import generate
from sparkwatch.model.parse import envelope_from_dict, parse_envelope
from sparkwatch.settings import SettingsError, load_listener_settings

QUERIES, BATCHES = 6, 3
OPERATORS = 4
BUDGET = 60
FULL_PER_QUERY = 343
"""Series per query of the whole catalogue for the bench fleet's query (issue 20's figure)."""
GENERATED = [
    *sorted((PACKAGE_DIR / GRAFANA_DIR).glob("*.json")),
    *sorted((PACKAGE_DIR / "generated" / "prometheus").glob("*.yaml")),
]
SERIES_NAME = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)")


def exposition(selection: Selection, provider: str = "rocksdb") -> str:
    """What the collector serves for a fleet of real 4-operator queries under ``selection``."""
    state = MetricState(batch_buckets=selection.batch_buckets,
                        phase_buckets=selection.phase_buckets)
    fleet = Fleet(queries=QUERIES, provider=provider)  # type: ignore[arg-type]
    for envelope in fleet.events(0, QUERIES * BATCHES):
        state.apply(parse_envelope(envelope_from_dict(envelope)))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state, selection=selection))
    registry.register(StalledGauge(state, StallBoard(), selection.exports(cat.QUERY_STALLED)))
    return b"".join(generate(registry)).decode()


def per_query_series(text: str) -> Counter[str]:
    """Sample lines of query-scoped series, by series name."""
    names: Counter[str] = Counter()
    for line in text.splitlines():
        if line and not line.startswith("#") and 'query_id="' in line:
            match = SERIES_NAME.match(line)
            assert match is not None, line
            names[match.group(1)] += 1
    return names


def families(text: str) -> set[str]:
    return {f for name in per_query_series(text) if (f := family_of(name)) is not None}


def test_the_default_costs_at_most_60_series_per_query_with_4_rocksdb_operators() -> None:
    series = per_query_series(exposition(select("default")))
    assert sum(series.values()) / QUERIES <= BUDGET
    # Per operator: identity, rows, memory, rows updated, rows removed and late rows dropped.
    assert series[cat.STATE_ROWS.name] == QUERIES * OPERATORS
    assert not any("rocksdb" in name for name in series)


def test_the_full_profile_is_todays_whole_catalogue() -> None:
    text = exposition(select("full"))
    assert sum(per_query_series(text).values()) == QUERIES * FULL_PER_QUERY
    assert text == exposition(Selection(PROFILES["full"]))
    assert PROFILES["full"] == {m.name for m in cat.ALL}


def test_an_allow_list_adds_families_to_the_profile() -> None:
    text = exposition(select("default", allow=["spark_streaming_state_rocksdb_.*"]))
    rocksdb = {f for f in families(text) if f.startswith("spark_streaming_state_rocksdb_")}
    assert cat.STATE_ROWS.name in families(text)
    assert "spark_streaming_state_rocksdb_sst_file_size_bytes" in rocksdb
    assert len(rocksdb) > 20


def test_a_deny_list_takes_families_out_and_wins_over_allow() -> None:
    phase = "spark_streaming_query_(last_)?phase_duration_seconds"
    rocksdb = "spark_streaming_state_rocksdb_.*"
    text = exposition(select("full", allow=[phase], deny=[phase, rocksdb]))
    found = families(text)
    assert cat.QUERY_PHASE_DURATION.name not in found
    assert cat.QUERY_LAST_PHASE_DURATION.name not in found
    assert not any("rocksdb" in f for f in found)
    assert cat.STATE_LAST_ROWS_UPDATED.name in found
    # A regex matches the whole name: a prefix alone matches nothing.
    assert select("full", deny=["spark_streaming_query"]).names == PROFILES["full"]


def test_histogram_buckets_are_configurable() -> None:
    text = exposition(select("full", batch_buckets=(1.0, 10.0), phase_buckets=(0.5,)))
    batch = re.findall(r'^spark_streaming_query_batch_duration_seconds_bucket\{.*le="([^"]+)"',
                       text, re.M)
    phase = re.findall(r'^spark_streaming_query_phase_duration_seconds_bucket\{.*le="([^"]+)"',
                       text, re.M)
    assert sorted(set(batch)) == ["+Inf", "1.0", "10.0"]
    assert sorted(set(phase)) == ["+Inf", "0.5"]
    assert len(batch) == 3 * QUERIES


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_the_exposition_passes_promtool_on_every_profile(profile: str, promtool: str) -> None:
    for provider in ("rocksdb", "hdfs"):
        text = exposition(select(profile), provider)
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True, timeout=60)
        assert (check.returncode, check.stdout, check.stderr) == (0, "", ""), (profile, provider)


def referenced(text: str) -> set[str]:
    """Catalogue names a generated file reads; a ``spark_streaming_*`` name that is no series of
    the catalogue fails here (a typo would be a panel without data)."""
    names = set(re.findall(r"spark_streaming_[a-z0-9_]+", text))
    unknown = {n for n in names if family_of(n) is None}
    assert not unknown, unknown
    return families_in(text)


def test_every_metric_a_committed_panel_or_rule_reads_is_in_the_default_profile() -> None:
    read = set().union(*(referenced(path.read_text()) for path in GENERATED))
    assert read <= PROFILES["default"], sorted(read - PROFILES["default"])


def test_the_default_profile_holds_nothing_the_dashboards_and_rules_do_not_read() -> None:
    config = load_config()
    texts = [json.dumps(board) for board in dashboards(config).values()]
    texts += [r.expr for r in recordings(config)] + [a.expr for a in build_alerts(config)]
    read = set().union(*(referenced(text) for text in texts))
    kept = {metric.name for metric, _ in EXTRAS}  # each with its reason
    assert read == PROFILES["default"] - kept, sorted((PROFILES["default"] - kept) ^ read)
    assert not read & kept and len(kept) == 4


def test_the_default_keeps_every_alert_and_full_keeps_every_panel() -> None:
    default, full = load_config(), load_config(overrides={"metrics_profile": "full"})
    assert [a.name for a in build_alerts(default)] == [a.name for a in build_alerts(full)]
    shown = {name: len(list(panels_in_order(board))) for name, board in dashboards(default).items()}
    every = {name: len(list(panels_in_order(board))) for name, board in dashboards(full).items()}
    assert all(0 < shown[name] <= every[name] for name in every)
    assert sum(shown.values()) < sum(every.values())
    assert len(recordings(default)) == len(recordings(full)) - 2  # phase mean, cache hit ratio


def test_listener_settings_choose_the_profile_lists_and_buckets() -> None:
    env = {
        "SPARKWATCH_METRICS_PROFILE": "full",
        "SPARKWATCH_METRICS_DENY": "spark_streaming_state_rocksdb_.*, spark_streaming_sink_.*",
        "SPARKWATCH_METRICS_BATCH_BUCKETS": "0.5,2,30",
    }
    selection = from_settings(load_listener_settings(env))
    assert "spark_streaming_state_rocksdb_gets_total" not in selection.names
    assert cat.SINK_INFO.name not in selection.names and cat.STATE_ROWS.name in selection.names
    assert selection.batch_buckets == (0.5, 2.0, 30.0)
    assert from_settings(load_listener_settings({})).names == PROFILES["default"]


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"SPARKWATCH_METRICS_PROFILE": "tiny"}, "SPARKWATCH_METRICS_PROFILE"),
        ({"SPARKWATCH_METRICS_ALLOW": "spark_(streaming"}, "SPARKWATCH_METRICS_ALLOW"),
        ({"SPARKWATCH_METRICS_PHASE_BUCKETS": "5,1"}, "SPARKWATCH_METRICS_PHASE_BUCKETS"),
        ({"SPARKWATCH_METRICS_BATCH_BUCKETS": "1,inf"}, "SPARKWATCH_METRICS_BATCH_BUCKETS"),
    ],
)
def test_bad_metric_settings_are_refused_naming_the_setting(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(SettingsError, match=named):
        load_listener_settings(env)


def test_collector_flags_choose_the_profile_lists_and_buckets() -> None:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["collector", "--metrics-profile", "default", "--metrics-allow",
                              "spark_streaming_query_phase_duration_seconds",
                              "--metrics-phase-buckets", "0.1,1"])
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    env = {"SPARKWATCH_COLLECTOR_NO_AUTH": "true",
           "SPARKWATCH_COLLECTOR_METRICS_PROFILE": "full"}  # the flag wins
    selection = from_settings(load_collector_settings(env, flags))
    assert selection.names == PROFILES["default"] | {cat.QUERY_PHASE_DURATION.name}
    assert selection.phase_buckets == (0.1, 1.0)


def test_the_helm_chart_builds_for_the_default_profile() -> None:
    values = yaml.safe_load((Path(PACKAGE_DIR).parent / "helm/sparkwatch/values.yaml").read_text())
    assert values["rules"]["metrics_profile"] == "default"
