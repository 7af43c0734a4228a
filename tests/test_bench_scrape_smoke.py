"""The scrape benchmark keeps working: a tiny fleet in a real collector process and a real
Pushgateway, the same series in both, and the CLI's table and record.

Figures are not checked here (the goals live in ``python -m bench scrape`` and
docs/benchmarks.md); only that both sides serve the same thing and every figure is measured.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.record import markers
from bench.scrape import peer as scrape_peer
from bench.scrape import procs as scrape_procs
from bench.scrape.fleet import spread
from bench.scrape.load import push_fleet
from bench.scrape.measure import body_of
from tests.bench_support import run_bench
from tests.conftest import unavailable

QUERIES, PER_APP, BATCHES = 20, 8, 2  # three apps, the last one smaller
GROUPING = {"job", "instance"}
Series = frozenset[tuple[str, str]]


@pytest.fixture(scope="module")
def pushgateway() -> str:
    if not Path(scrape_procs.PUSHGATEWAY).exists():
        unavailable(f"{scrape_procs.PUSHGATEWAY} missing (apt-get install prometheus-pushgateway)")
    return scrape_procs.PUSHGATEWAY


def catalogue_series(text: str) -> dict[tuple[str, Series], float]:
    """``spark_streaming_*`` samples by name and labels, without the Pushgateway's grouping
    labels and the collector's ``tenant``; ``le`` as a number (Go writes 1 where Python writes
    1.0)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.startswith("spark_streaming_"):
                continue
            labels = {k: v for k, v in s.labels.items() if k not in GROUPING and k != "tenant"}
            if "le" in labels:
                labels["le"] = repr(float(labels["le"]))
            out[(s.name, frozenset(labels.items()))] = s.value
    return out


@pytest.mark.timeout(120)  # a hang guard; it takes a few seconds
def test_the_collector_and_the_pushgateway_serve_the_same_series(
    tmp_path: Path, pushgateway: str
) -> None:
    apps = spread(QUERIES, PER_APP)
    token = secrets.token_urlsafe(16)
    spec = scrape_procs.CollectorSpec(tmp_path, token, max_apps=10, max_queries_per_app=PER_APP,
                                      max_queries=1000)
    with (scrape_procs.collector(spec) as sw, httpx.Client(timeout=60) as client,
          scrape_procs.pushgateway(tmp_path, pushgateway, check_pushes=True) as pg):
        loaded = push_fleet(sw.url, token, apps, BATCHES, batch_size=7)
        # With its consistency check on, the Pushgateway refuses any group whose HELP or TYPE
        # disagrees with what it holds: every push passing is part of the check.
        pushed = scrape_peer.push_fleet(pg.url, apps, BATCHES)
        ours = body_of(client, sw.url + "/metrics").decode()
        theirs = body_of(client, pg.url + "/metrics").decode()
    assert loaded.events == QUERIES * BATCHES and loaded.requests == 3 + 3 + 2  # ≤7 events each
    assert pushed.groups == QUERIES + len(apps)  # one per query, one per app (app_info)
    mine, peer = catalogue_series(ours), catalogue_series(theirs)
    assert len(mine) == pushed.series > QUERIES * 300
    assert mine == peer
    assert theirs.count("\npush_time_seconds{") == pushed.groups


@pytest.mark.timeout(120)
def test_the_cli_prints_and_records_the_table(
    tmp_path: Path, pushgateway: str, capsys: pytest.CaptureFixture[str],
) -> None:
    doc, raw = tmp_path / "benchmarks.md", tmp_path / "scrape.json"
    argv = ["scrape", "--queries", str(QUERIES), "--queries-per-app", str(PER_APP),
            "--batches", str(BATCHES), "--scrapes", "2", "--pushgateway", pushgateway,
            "--record", "--json", str(raw)]
    assert run_bench(argv, doc) == 0
    [result] = json.loads(raw.read_text())
    check_result(result)
    printed = capsys.readouterr().out
    begin, end = markers("scrape")
    assert begin in doc.read_text() and end in doc.read_text()
    for text in (printed, doc.read_text()):
        assert "| scrape p50 ms, `Accept-Encoding: gzip` |" in text
        assert "Pushgateway / sparkwatch" in text and "SERIES DIFFER" not in text
        assert f"{QUERIES} × 4, collector peak RSS" in text
        assert "| **before / now** |" in text
        assert "| `spark_streaming_*` series per query |" in text
        assert f"{QUERIES} × 4, default profile:" in text and "goal at most 60: MET" in text


def check_result(result: dict[str, Any]) -> None:
    sw, pg = result["sparkwatch"], result["pushgateway"]
    assert result["events"] == QUERIES * BATCHES and result["apps"] == 3
    for side in (sw, pg):
        assert side["census"]["queries"] == QUERIES
        assert side["census"]["spark_streaming"] == pg["push"]["series"]
        for encoding in ("identity", "gzip"):
            scraped = side["scrapes"][encoding]
            assert scraped["served"] == encoding and scraped["latency"]["n"] == 2
            assert 0 < scraped["latency"]["p50_ms"] <= scraped["latency"]["max_ms"]
        assert side["scrapes"]["gzip"]["wire_bytes"] < side["scrapes"]["identity"]["wire_bytes"]
        assert 0 < side["memory_loaded"]["VmRSS"] <= side["memory_scraped"]["VmHWM"]
    assert pg["census"]["push_time"] == pg["census"]["push_failure_time"] == pg["push"]["groups"]
    assert sw["census"]["sparkwatch_collector"] > 0 and pg["census"]["sparkwatch_collector"] == 0
    # In-process, both renderers (compared byte for byte by the bench) over the same series.
    assert result["render"]["bytes"] > 0 and result["render"]["sparkwatch"]["n"] == 3
    # The profiles side by side: the default within its budget, full the whole catalogue (what
    # the collector served above).
    default, full = result["profiles"]["default"], result["profiles"]["full"]
    assert default["per_query"] <= 60 < full["per_query"]
    assert full["series"] == sw["census"]["spark_streaming"]
    assert default["bytes"] < full["bytes"] and default["render"]["n"] == 3


def test_the_profiles_alone_print_and_record_their_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    doc, raw = tmp_path / "benchmarks.md", tmp_path / "profiles.json"
    argv = ["scrape", "--profiles-only", "--queries", str(QUERIES), "--queries-per-app",
            str(PER_APP), "--batches", str(BATCHES), "--renders", "2", "--record", "--json",
            str(raw)]
    assert run_bench(argv, doc) == 0
    [result] = json.loads(raw.read_text())
    default, full = result["profiles"]["default"], result["profiles"]["full"]
    assert default["per_query"] <= 60 < full["per_query"] and full["render"]["n"] == 2
    begin, end = markers("scrape-profiles")
    assert begin in doc.read_text() and end in doc.read_text()
    assert "| `spark_streaming_*` series per query |" in capsys.readouterr().out
