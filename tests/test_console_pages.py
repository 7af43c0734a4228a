"""The console's pages on a canned history (real Spark progress JSON), on SQLite and PostgreSQL:
what `/` and `/queries/<id>` show, escaping, the CSP, bad parameters, live points, GET only."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge

from sparkwatch.console.app import CSP, Console
from sparkwatch.console.history import HistoryData, anchor_of, offsets_behind
from sparkwatch.history import migrate
from sparkwatch.listener.exporter import serve_metrics
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.contract import INT64_MAX
from tests.test_history_reader import AGG, JOIN, NEW_RUN, OLD_RUN, QUERY, agg_runs_and_join
from tests.test_history_support import (
    APP,
    batch_of,
    migrated_database,
    progress,
    started,
    terminated,
    write,
)

JOIN_QUERY = JOIN["id"]
HOSTILE_ID = "e0000000-0000-4000-8000-00000000000e"
FAILED_ID = "f0000000-0000-4000-8000-00000000000f"
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def _agg(run_id: str, batch_id: int, minute: int) -> dict[str, Any]:
    raw = batch_of(AGG, batch_id, f"2026-11-21T09:{minute:02d}:00.000Z", runId=run_id)
    # Batch 5 drops late rows: doctor reports it, the page links the finding to its chart.
    raw["stateOperators"] = [{**raw["stateOperators"][0], "numRowsTotal": 10 * (batch_id + 1),
                              "numRowsDroppedByWatermark": 4 if batch_id == 5 else 0}]
    return raw


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def history_db(request: pytest.FixtureRequest) -> Iterator[str]:
    for url in migrated_database(request):
        write(
            url,
            *agg_runs_and_join([progress(_agg(OLD_RUN, b, b)) for b in range(3)],
                               [progress(_agg(NEW_RUN, b, 10 + b)) for b in range(3, 6)]),
            progress(batch_of(JOIN, 1, "2026-11-21T08:00:00.000Z", id=HOSTILE_ID,
                              runId=HOSTILE_ID, name=HOSTILE)),
            started(FAILED_ID, FAILED_ID, "broken", "2026-11-21T07:00:00.000Z"),
            progress(batch_of(JOIN, 1, "2026-11-21T07:00:05.000Z", id=FAILED_ID,
                              runId=FAILED_ID, name="broken")),
            terminated(FAILED_ID, FAILED_ID, "2026-11-21T07:00:09.000Z", "boom", "FAILED_Y"),
        )
        yield url


def _html(console: Console, path: str, **params: str) -> str:
    response = console.handle(path, params, None)
    assert response.status == 200, response.body[:500]
    assert ("Content-Security-Policy", CSP) in response.headers
    return response.body.decode()


def test_overview_lists_every_query_with_a_link_and_marks_the_failed_one(
        console: Console) -> None:
    html = _html(console, "/")
    for qid in (QUERY, JOIN_QUERY, HOSTILE_ID, FAILED_ID):
        assert f'href="/queries/{qid}"' in html
    assert f'<tr class="status-failed" data-query-id="{FAILED_ID}">' in html
    # The canned history is days old and no live state knows its queries: those "running"
    # by the history are marked silent (a driver gone without a termination event).
    assert f'<tr class="status-silent" data-query-id="{QUERY}">' in html
    assert "4 queries, 0 active, 1 failed" in html
    # window_agg's latest run is running: its row shows the state rows of batch 5 (60) and a
    # sparkline over the run's batches 3-5 (the sparkline reads the latest run only).
    row = re.search(rf'<tr class="status-(\w+)" data-query-id="{QUERY}">(.*?)</tr>', html).group(2)
    assert "<td>60</td>" in row and 'aria-label="3 points, last 60"' in row


def test_operators_whose_state_sums_past_64_bits_leave_every_query_on_the_overview(
        tmp_path: Any) -> None:
    # Each value is one the contract accepts; SQLite's SUM over the two operators overflowed,
    # and the overview of every app said "history not readable yet".
    url = f"sqlite:///{tmp_path / 'history.db'}"
    migrate.upgrade(url)
    largest = batch_of(JOIN, 1, "2026-11-21T08:00:00.000Z", id=HOSTILE_ID, runId=HOSTILE_ID)
    op = {**largest["stateOperators"][0], "numRowsTotal": INT64_MAX,
          "memoryUsedBytes": INT64_MAX}
    largest["stateOperators"] = [op, {**op}]
    write(url, progress(_agg(NEW_RUN, 0, 0)), progress(largest))
    data = HistoryData(url)
    try:
        html = _html(Console(data, lambda _tenant: []), "/")
    finally:
        data.close()
    assert "not readable" not in html and "2 queries" in html
    row = re.search(rf'data-query-id="{HOSTILE_ID}">(.*?)</tr>', html).group(1)
    assert 'aria-label="1 points, last 9.22e+18"' in row  # saturated, as the rollups' sums are


def test_a_name_with_markup_is_text_on_every_page(console: Console) -> None:
    for html in (_html(console, "/"), _html(console, f"/queries/{HOSTILE_ID}", range="all")):
        assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in html
        assert "<script>alert" not in html and "<img" not in html
        # The only script is our own file.
        assert re.findall(r"<script[^>]*>", html) == ['<script src="/console.js" defer>']


def test_query_page_draws_each_operator_over_time_with_runs_and_batches(
        console: Console) -> None:
    html = _html(console, f"/queries/{QUERY}", range="all")
    assert 'id="op-0-rows"' in html and 'id="op-0-memory"' in html and 'id="op-0-time"' in html
    rows_chart = html[html.index('id="op-0-rows"'):html.index('id="op-0-changes"')]
    assert 'data-points="6"' in rows_chart  # both runs' batches 0-5
    assert "last 60" in rows_chart
    for chart in ("batches", "rates", "watermark", "backlog"):
        assert f'id="{chart}"' in html
    assert OLD_RUN in html and "STREAM_FAILED" in html
    assert html.count("<tr><td>") == 6  # the batches table: batches 5..0


def test_the_rocksdb_join_has_rocksdb_charts(console: Console) -> None:
    html = _html(console, f"/queries/{JOIN_QUERY}", range="all")
    assert 'id="op-0-rocksdb"' in html and "rocksdbSstFileSize" in html


def test_a_range_without_batches_draws_empty_charts(console: Console) -> None:
    html = _html(console, f"/queries/{QUERY}", range="15m")
    assert "no data in this range" in html


def test_bad_parameters_are_400_naming_the_parameter(console: Console) -> None:
    for path, params, name in (("/", {"sort": "nope"}, "sort"),
                               (f"/queries/{QUERY}", {"range": "2y"}, "range"),
                               (f"/queries/{QUERY}", {"page": "-1"}, "page")):
        response = console.handle(path, params, None)
        assert response.status == 400 and f"{name}: expected".encode() in response.body


def test_an_unknown_query_is_404(console: Console) -> None:
    assert console.handle("/queries/no-such-query", {}, None).status == 404
    assert console.handle("/queries/<script>x</script>", {}, None).status == 404


def test_a_prefix_of_several_query_ids_is_404_saying_so_not_no_query(tmp_path: Path) -> None:
    """"no query" sent the reader looking for a query that is there, twice."""
    url = f"sqlite:///{tmp_path / 'history.db'}"
    ids = ["abcd0000-0000-4000-8000-000000000001", "abcd0000-0000-4000-8000-000000000002"]
    write(url, *(progress(batch_of(JOIN, 1, "2026-11-21T08:00:00.000Z", id=qid, runId=qid,
                                   name=f"q{n}")) for n, qid in enumerate(ids)))
    data = HistoryData(url)
    try:
        console = Console(data, lambda _tenant: [])
        several = console.handle("/queries/abcd", {}, None)
        assert several.status == 404
        assert (f"&#x27;abcd&#x27; is the start of the ids of more than one query ({ids[0]}, "
                f"{ids[1]})").encode() in several.body, several.body[-800:]
        assert b"sqlite" not in several.body and str(tmp_path).encode() not in several.body
        assert console.handle(f"/queries/{ids[1][:-1]}2", {}, None).status == 200
        assert b"no query with id or name &#x27;nope&#x27;" in console.handle(
            "/queries/nope", {}, None).body
    finally:
        data.close()


@pytest.mark.parametrize("query", ["a\x00b", "\ud800", "x" * 100_000])
def test_a_query_key_no_history_can_hold_is_400_naming_it(console: Console, query: str) -> None:
    response = console.handle("/queries/" + query, {}, None)
    assert response.status == 400 and response.body.startswith(b"<!doctype html>")
    assert b"query: " in response.body and b"\x00" not in response.body


def test_the_overview_sorts_by_the_chosen_column(console: Console) -> None:
    for order in ("desc", "asc"):
        html = _html(console, "/", sort="rows", order=order)
        # The sixth cell of each row is its state rows.
        shown = [int(m) for m in re.findall(r"<tr class=[^>]*>(?:<td>.*?</td>){5}<td>(\d+)</td>",
                                            html)]
        assert len(shown) == 4 and shown == sorted(shown, reverse=order == "desc")


def test_live_points_newer_than_the_history_are_drawn(console: Console) -> None:
    state = MetricState()
    state.apply(progress(_agg(NEW_RUN, 6, 16)))
    live = Console(console.history, lambda _tenant: [state])
    html = _html(live, f"/queries/{QUERY}", range="all")
    rows_chart = html[html.index('id="op-0-rows"'):html.index('id="op-0-changes"')]
    assert 'data-points="7"' in rows_chart and "last 70" in rows_chart


def test_a_doctor_finding_links_to_the_chart_that_shows_it(console: Console) -> None:
    html = _html(console, f"/queries/{QUERY}", range="all")
    link = re.search(r'<section id="findings">.*?<a href="#([^"]+)">[^<]*late-rows-dropped', html)
    assert link is not None and link.group(1) == "op-0-dropped"
    chart = html[html.index('id="op-0-dropped"'):]
    assert "last 4" in chart[:chart.index("</figure>")]


def test_doctor_findings_map_to_chart_anchors() -> None:
    assert anchor_of("late-rows-dropped", 1) == "op-1-dropped"
    assert anchor_of("rocksdb-write-stalls", 0) == "op-0-rocksdb"
    assert anchor_of("watermark-delay-excessive", 0) == "watermark"
    assert anchor_of("state-growing-without-removals", 2) == "op-2-rows"


def test_a_url_password_in_an_exception_is_not_shown() -> None:
    from sparkwatch.console.history import _first_line

    line = _first_line("java.sql.SQLException: jdbc:postgresql://etl:hunter2@db/x refused\n\tat")
    assert line == "java.sql.SQLException: jdbc:postgresql://***@db/x refused"


def test_backlog_is_the_offsets_behind_latest() -> None:
    assert offsets_behind({"t": {"0": 5, "1": 7}}, {"t": {"0": 9, "1": 7}}) == 4
    assert offsets_behind(10, 25) == 15
    assert offsets_behind("x", {"t": 1}) is None


def test_values_at_the_ends_of_a_float_are_drawn_inside_the_chart() -> None:
    """A rate of 1.7e308 beside one of -1.7e308 (both finite, both accepted): the span between
    them overflowed, every coordinate became NaN and the page a 500."""
    from sparkwatch.console.svg import Series, line_chart, sparkline

    chart = line_chart("rates", "rows/s", [Series("in", [(1.0, 1.7e308), (2.0, -1.7e308)])])
    [points] = re.findall(r' points="([^"]*)"', chart)
    assert points == "78,8 552,158"  # top left to bottom right of the plot
    assert ">1.7e+308 rows/s<" in chart and ">-1.7e+308 rows/s<" in chart
    assert 'points="1.0,2.0 60.0,22.0 119.0,12.0"' in sparkline([1.7e308, -1.7e308, 0.0])


def test_the_driver_port_serves_metrics_and_pages_and_refuses_writes(console: Console) -> None:
    registry = CollectorRegistry()
    Gauge("console_test_gauge", "a gauge", registry=registry).set(7)
    server = serve_metrics(registry, "127.0.0.1", 0, console)
    base = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:  # noqa: S310
            assert b"console_test_gauge 7.0" in r.read()
        with urllib.request.urlopen(base + "/", timeout=10) as r:  # noqa: S310
            assert r.headers["Content-Security-Policy"] == CSP
            assert f"/queries/{QUERY}".encode() in r.read()
        with urllib.request.urlopen(base + "/console.js", timeout=10) as r:  # noqa: S310
            assert r.headers["Content-Type"].startswith("text/javascript")
        request = urllib.request.Request(base + "/", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)  # noqa: S310
        assert refused.value.code == 405
    finally:
        server.stop()
    assert not any(t.name == "sparkwatch-http" and t.is_alive() for t in threading.enumerate())


def test_without_a_history_the_live_state_is_shown() -> None:
    state = MetricState()
    state.apply(progress(_agg(NEW_RUN, 6, 16)))
    live = Console(None, lambda _tenant: [state])
    assert f'href="/queries/{QUERY}"' in _html(live, "/")
    html = _html(live, f"/queries/{QUERY}")
    assert "no history configured" in html and 'id="op-0-rows"' in html
    assert "last 70" in html


def test_the_app_name_comes_from_the_history(console: Console) -> None:
    assert APP.name in _html(console, "/")
