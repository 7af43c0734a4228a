"""The listener benchmark keeps working: a tiny real run, its tables, and the CLI's plan.

Figures are not checked here (speed goals live in ``python -m bench listener`` and
docs/benchmarks.md); only that every part measures something consistent.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.listener import cmd as listener_cmd
from bench.listener import report
from bench.listener.config import RunConfig
from bench.listener.e2e import batch_id_in
from bench.listener.runner import run_all
from bench.record import markers, write_block
from bench.timing import summarize_ns
from tests.conftest import unavailable

# One Spark process with both listeners and the /metrics probe covers every measuring part with a
# single JVM start (the full benchmark runs each listener in its own process as well).
SMOKE = RunConfig(kind="both", queries=1, seconds=2.0, result_path="", workdir="",
                  drain_seconds=20.0, probe_e2e=True)


@pytest.fixture(scope="module")
def smoke_result() -> dict[str, Any]:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        unavailable("pyspark not installed")
    if shutil.which("java") is None:
        unavailable("java not installed")
    return run_all([SMOKE], keep_logs=False, progress=lambda _msg: None)[0]


@pytest.mark.spark
@pytest.mark.timeout(300)  # a hang guard; the run takes ~15-40 s
def test_a_tiny_run_counts_and_times_every_progress_event(smoke_result: dict[str, Any]) -> None:
    run = smoke_result
    assert run["failures"] == [] and run["warmed_up"] and run["drained"]
    assert run["produced"] >= 1
    assert run["spark_dropped_streams"] == 0 and run["streams_capacity"] == 10_000
    for name in ("sparkwatch", "public"):
        lst = run["listeners"][name]
        # One light query: nothing may be lost, and every event is timed and exported once.
        assert lst["received"] == run["produced"], name
        assert lst["callback"]["n"] == lst["received"], name
        assert lst["exported"] == lst["received"] and lst["settled"], name
    sw, pub = run["listeners"]["sparkwatch"], run["listeners"]["public"]
    assert sw["intake_received"] == sw["received"] and sw["intake_dropped"] == 0
    assert pub["export_errors"] == 0 and pub["inline_export"]["n"] == pub["received"]
    for lst in (sw, pub):  # visible on /metrics and in the SQLite history, through both paths
        assert lst["e2e"]["n"] >= 1 and lst["e2e_timeouts"] == 0
        assert lst["e2e_history"]["n"] >= 1 and lst["e2e_history_timeouts"] == 0


@pytest.mark.spark
@pytest.mark.timeout(300)
def test_the_tables_render_from_a_real_run(smoke_result: dict[str, Any], tmp_path: Path) -> None:
    opts = listener_cmd.options(_parse(["--quick"]))
    body = listener_cmd.render(smoke_result, [smoke_result], opts)
    assert "**public / sparkwatch**" in body and "| 1 | sparkwatch |" in body
    assert "history median ms" in body and "+ history write" in body
    assert "callback time, public/sparkwatch:" in body
    doc = tmp_path / "benchmarks.md"
    write_block(doc, "listener", "Listener", "first")
    write_block(doc, "listener", "Listener", body)
    begin, end = markers("listener")
    assert doc.read_text().count(begin) == 1 and body in doc.read_text() and end in doc.read_text()


def test_quick_and_full_plans() -> None:
    quick = listener_cmd.plan(listener_cmd.options(_parse(["--quick"])))
    assert [(c.kind, c.queries) for c in quick] == [("both", 1), ("sparkwatch", 1), ("public", 1)]
    full = listener_cmd.plan(listener_cmd.options(_parse(["--queries", "1,6,12"])))
    assert [c.queries for c in full] == [2, 1, 1, 6, 6, 12, 12] and full[0].seconds == 30
    assert [c.probe_e2e for c in full[:3]] == [False, True, True]
    assert all(c.history for c in full)
    events = listener_cmd.plan(listener_cmd.options(_parse(["--runs", "events", "--queries", "3"])))
    assert [c.kind for c in events] == ["sparkwatch", "public"]


def test_batch_id_is_read_from_the_exposition_of_the_right_query() -> None:
    text = (
        'spark_streaming_query_batch_id{app_name="a",app_id="x",query_id="q1",query_name=""} 4.0\n'
        'spark_streaming_query_batch_id{app_name="a",app_id="x",query_id="q2",query_name=""} 9.0\n'
    )
    assert batch_id_in(text, "q2") == 9.0 and batch_id_in(text, "q3") is None


def test_percentiles_are_nearest_rank() -> None:
    summary = summarize_ns([i * 1_000_000 for i in range(1, 101)])
    assert summary is not None
    assert (summary.median_ms, summary.p90_ms, summary.p99_ms) == (50.0, 90.0, 99.0)
    assert report.ratio(10.0, 0.5) == "20.0×"


def _parse(args: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    listener_cmd.add_arguments(parser)
    return parser.parse_args(args)
