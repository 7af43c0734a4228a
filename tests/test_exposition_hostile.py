"""Defence in depth behind the validation contract: whatever reaches the metric state, /metrics
renders every other series, stays small, passes promtool, and its counters never go down."""

from __future__ import annotations

import dataclasses
import subprocess
from typing import Any

from prometheus_client import CollectorRegistry

from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.text import DROPPED, DROPPED_FAMILY, LABEL_VALUE_MAX_CHARS, render
from sparkwatch.model.events import AppInfo, ParsedEvent
from tests.test_collector_support import samples
from tests.test_exposition import fixture, progress_events

APP = AppInfo("hostile", "app-h", "4.3.0")


def _scrape(state: MetricState) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state, None))
    return b"".join(render(list(registry.collect()), report_dropped=True)).decode()


def _renamed(events: list[ParsedEvent], query_id: str, name: str) -> list[ParsedEvent]:
    out = []
    for e in events:
        ev = dataclasses.replace(e.event, query_id=query_id, name=name)
        out.append(dataclasses.replace(e, event=ev))
    return out


def _promtool_ok(promtool: str, text: str) -> None:
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert (check.returncode, check.stdout, check.stderr) == (0, "", "")


def _batches(text: str) -> dict[str, float]:
    return {labels["query_id"]: v
            for labels, v in samples(text, "spark_streaming_query_batches_total")}


def test_names_the_contract_refuses_cost_only_their_own_series(promtool: str) -> None:
    events = progress_events(fixture("spark-4.3.0/window_agg_hdfs.json"))
    state = MetricState(terminated_grace_seconds=300.0)
    names = {"good": "ok", "surrogate": "bad\ud800name", "huge": "n" * (1 << 20),
             "markup": '<script>alert("x")</script>\\\n', "nul": "a\x00b"}
    for qid, name in names.items():
        for e in _renamed(events, qid, name):
            state.apply(e)
    dropped_before = DROPPED.total
    text = _scrape(state)
    assert set(_batches(text)) == {"good", "huge", "markup", "nul"}  # the surrogate's left out
    assert DROPPED.total > dropped_before
    assert f"{DROPPED_FAMILY} " in text
    assert len(text.encode()) < 400_000  # the 1 MiB name is cut to its first 256 characters
    assert "n" * LABEL_VALUE_MAX_CHARS not in text
    _promtool_ok(promtool, text)


def test_two_descriptions_cut_to_the_same_label_render_one_series(promtool: str) -> None:
    events = progress_events(fixture("spark-4.3.0/window_agg_hdfs.json"))
    state = MetricState(terminated_grace_seconds=300.0)
    for i, e in enumerate(events):
        source = dataclasses.replace(e.event.sources[0], description="s" * 300 + str(i % 2))
        state.apply(dataclasses.replace(e, event=dataclasses.replace(
            e.event, sources=(source, dataclasses.replace(source, index=0)))))
    _promtool_ok(promtool, _scrape(state))


def test_counters_never_go_down_on_negative_amounts_or_a_new_run() -> None:
    events = progress_events(fixture("spark-4.3.0/window_agg_hdfs.json"))
    state = MetricState(terminated_grace_seconds=300.0)
    seen: list[float] = []
    for i, e in enumerate(events):
        op = dataclasses.replace(e.event.state_operators[0], num_rows_updated=-5 if i % 2 else 3)
        run = e.event.run_id if i < 3 else "second-run"
        state.apply(dataclasses.replace(e, event=dataclasses.replace(
            e.event, run_id=run, batch_id=i, state_operators=(op,))))
        seen.append(_rows_updated(_scrape(state)))
    assert seen == sorted(seen) and seen[-1] == 3 * len(range(0, len(events), 2))


def _rows_updated(text: str) -> float:
    values: list[Any] = [v for _, v in samples(text, "spark_streaming_state_rows_updated_total")]
    return float(sum(values))
