"""The console under a reviewer's inputs, on SQLite and PostgreSQL: numbers in non-ASCII digits,
more queries than a page holds, a query with many operators and long series, a history that
cannot be read (no detail reaches the page), right-to-left names, non-ASCII names through the
driver's server, and refresh=0 kept by every link."""

from __future__ import annotations

import logging
import re
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from sparkwatch.console import pages
from sparkwatch.console.app import Console
from sparkwatch.console.history import HistoryData
from sparkwatch.console.model import QueryDetail
from sparkwatch.history.views import StatePoint
from sparkwatch.listener.exporter import serve_metrics
from sparkwatch.model.events import ParsedEvent
from tests.test_console_pages import _html
from tests.test_history_reader import AGG
from tests.test_history_support import (
    batch_of,
    migrated_database,
    progress,
    started,
    terminated,
    write,
)

MANY = 260
FAILED_ID = "fa000000-0000-4000-8000-00000000000f"
ACTIVE_ID = "ac000000-0000-4000-8000-00000000000a"
WIDE_ID = "0b000000-0000-4000-8000-000000000020"
RTL_ID = "2e000000-0000-4000-8000-00000000202e"
CAFE_ID = "cafe0000-0000-4000-8000-0000000000e9"
RTL_NAME = "\u202eevil-name"
RTL_SHOWN = "\\u202eevil-name"
"""How the pages show RTL_NAME: the override as its escape, as a terminal shows it."""
CAFE_NAME = "caf\u00e9-\u00fc-1"
WIDE_OPERATORS = 20


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _many_id(i: int) -> str:
    return f"a6000000-0000-4000-8000-{i:012d}"


def _query(query_id: str, name: str, at: datetime, end: str | None = None,
           operators: int = 1, batches: int = 1) -> list[ParsedEvent]:
    """A run of ``query_id`` started at ``at`` with ``batches`` batches a minute apart; ended
    ``end`` ("terminated", "failed") after them, or left running."""
    events = [started(query_id, query_id, name, _iso(at))]
    for b in range(batches):
        raw = batch_of(AGG, b, _iso(at + timedelta(minutes=b)), id=query_id, runId=query_id,
                       name=name)
        op = raw["stateOperators"][0]
        raw["stateOperators"] = [{**op, "numRowsTotal": 100 * i + b} for i in range(operators)]
        events.append(progress(raw))
    if end is not None:
        last = _iso(at + timedelta(minutes=batches))
        events.append(terminated(query_id, query_id, last, *(
            ("boom", "FAILED_Y") if end == "failed" else ())))
    return events


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def history_db(request: pytest.FixtureRequest) -> Iterator[str]:
    long_ago = datetime(2026, 11, 1, tzinfo=UTC)
    events: list[ParsedEvent] = []
    # The failed query is the least recently active of all: 260 newer ones came after it.
    events += _query(FAILED_ID, "failed-long-ago", long_ago - timedelta(days=1), "failed")
    for i in range(MANY):
        events += _query(_many_id(i), f"many-{i:04d}", long_ago + timedelta(minutes=i),
                         "terminated")
    events += _query(WIDE_ID, "wide", long_ago, "terminated", WIDE_OPERATORS, 3)
    events += _query(RTL_ID, RTL_NAME, long_ago, "terminated")
    events += _query(CAFE_ID, CAFE_NAME, long_ago, "terminated")
    # Running, with a batch a moment ago: active.
    events += _query(ACTIVE_ID, "active-now", datetime.now(UTC) - timedelta(seconds=30))
    for url in migrated_database(request):
        write(url, *events)
        yield url


ALL = MANY + 5


def _listed(html: str) -> list[str]:
    return re.findall(r'<tr class="[^"]*" data-query-id="([^"]+)">', html)


# --- numbers ---------------------------------------------------------------------------------


@pytest.mark.parametrize("digits", ["\u00b2", "\u0663", "\uff11"])
def test_a_number_in_digits_other_than_ascii_is_400_naming_the_parameter(
        console: Console, digits: str) -> None:
    """'²' made int() raise (a 500); Arabic-Indic '٣' was read as 3."""
    for path, name in (("/", "refresh"), (f"/queries/{WIDE_ID}", "page"),
                       (f"/queries/{WIDE_ID}", "refresh"), ("/", "page")):
        response = console.handle(path, {name: digits}, None)
        assert response.status == 400, (path, name, response.body[:300])
        assert f"{name}: expected a whole number".encode() in response.body


def test_the_driver_server_answers_a_non_ascii_digit_with_400_and_no_traceback(
        console: Console, capfd: pytest.CaptureFixture[str]) -> None:
    server = serve_metrics(CollectorRegistry(), "127.0.0.1", 0, console)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(  # noqa: S310
                f"http://127.0.0.1:{server.port}/?refresh=%C2%B2", timeout=30)
        assert refused.value.code == 400
        assert b"refresh: expected a whole number" in refused.value.read()
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err


# --- the overview: every query counted, failed and active first, pages ------------------------


def test_the_overview_counts_every_query_and_shows_failed_and_active_ones_first(
        console: Console) -> None:
    html = _html(console, "/", refresh="0")
    assert f"{ALL} queries, 1 active, 1 failed" in html
    assert f"showing {pages.OVERVIEW_PAGE} of {ALL}" in html
    shown = _listed(html)
    assert len(shown) == pages.OVERVIEW_PAGE
    # The default order: failed first, then active, then the most recently active.
    assert shown[:2] == [FAILED_ID, ACTIVE_ID]
    assert shown[2] == _many_id(MANY - 1)


def test_the_overview_pages_through_every_query_once(console: Console) -> None:
    first = _html(console, "/", refresh="0")
    assert 'href="/?sort=status&amp;order=asc&amp;refresh=0&amp;page=1">next page' in first
    second = _html(console, "/", refresh="0", page="1")
    assert f"showing {ALL - pages.OVERVIEW_PAGE} of {ALL}" in second
    assert 'href="/?sort=status&amp;order=asc&amp;refresh=0">previous page' in second
    seen = _listed(first) + _listed(second)
    assert len(seen) == ALL and len(set(seen)) == ALL
    assert {FAILED_ID, ACTIVE_ID, WIDE_ID, RTL_ID, CAFE_ID} <= set(seen)


def test_a_column_sort_orders_the_rows_of_the_page(console: Console) -> None:
    html = _html(console, "/", sort="name", order="desc", page="1")
    names = re.findall(r'<a class="query" href="[^"]+"><bdi>([^<]+)</bdi>', html)
    assert len(names) == ALL - pages.OVERVIEW_PAGE
    # Ordered by the names themselves, not by how they are shown (U+202E as "\\u202e").
    assert RTL_SHOWN in names
    assert names == sorted(names, key=lambda n: n.replace(RTL_SHOWN, RTL_NAME).lower(),
                           reverse=True)


# --- the query page: operators by page, a points budget --------------------------------------


def test_a_query_page_draws_one_page_of_operators_and_links_the_others(
        console: Console) -> None:
    html = _html(console, f"/queries/{WIDE_ID}", range="all", refresh="0")
    drawn = re.findall(r'<section class="operator" id="op-(\d+)">', html)
    assert drawn == [str(i) for i in range(pages.OPERATORS_PAGE)]
    assert f"operators 1-{pages.OPERATORS_PAGE} of {WIDE_OPERATORS}" in html
    assert f'href="/queries/{WIDE_ID}?range=all&amp;refresh=0&amp;ops=1#operators"' in html
    last = _html(console, f"/queries/{WIDE_ID}", range="all", ops="2")
    drawn = re.findall(r'<section class="operator" id="op-(\d+)">', last)
    assert drawn == [str(i) for i in range(2 * pages.OPERATORS_PAGE, WIDE_OPERATORS)]
    rows_chart = last[last.index('id="op-19-rows"'):]
    assert 'data-points="3"' in rows_chart[:rows_chart.index("</figure>")]
    assert "last 1902" in rows_chart[:rows_chart.index("</figure>")]


def _points(operators: int, points: int) -> dict[int, list[StatePoint]]:
    start = datetime(2026, 11, 21, tzinfo=UTC).timestamp()
    fields: dict[str, Any] = {name: 1 for name in StatePoint.__dataclass_fields__}
    return {i: [StatePoint(**{**fields, "timestamp": datetime.fromtimestamp(start + 10 * p, UTC),
                              "run_id": "r", "operator_index": i, "operator_name": f"op{i}",
                              "num_rows_total": p, "custom_metrics": {}})
                for p in range(points)] for i in range(operators)}


def test_the_charts_of_a_page_draw_at_most_the_points_budget_keeping_each_last_point() -> None:
    operators = _points(pages.OPERATORS_PAGE, 2000)
    detail = QueryDetail("q", "q", "app", "running", [], operators, {}, [], [], [],
                         operator_indexes=sorted(operators))
    html = pages.query_page(detail, "all", 0, 10, 0)
    drawn = [int(n) for n in re.findall(r'data-points="(\d+)"', html)]
    assert pages.MAX_PAGE_POINTS // 2 < sum(drawn) <= pages.MAX_PAGE_POINTS
    rows_chart = html[html.index('id="op-0-rows"'):]
    assert "last 1999" in rows_chart[:rows_chart.index("</figure>")]
    assert len(html) < 400_000


# --- an unreadable history: a generic note on the page, the detail in the log once ------------


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_an_unreadable_history_shows_a_generic_note_and_logs_the_detail_once(
        kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # A name of this run's own: the detail is logged once per process, whichever test met it.
    secret = f"hidden_{uuid.uuid4().hex[:12]}"
    url = (f"sqlite:///{tmp_path / secret / 'h.db'}" if kind == "sqlite"
           else f"postgresql+psycopg://someone:pw@127.0.0.1:1/{secret}")
    data = HistoryData(url)
    console = Console(data, lambda _tenant: [])
    caplog.set_level(logging.INFO, logger="sparkwatch.console")
    try:
        pages_shown = [console.handle(path, {}, None) for path in ("/", "/", "/queries/x")]
    finally:
        data.close()
    for response in pages_shown:
        body = response.body.decode()
        assert secret not in body and str(tmp_path) not in body
        assert "127.0.0.1" not in body and "SPARKWATCH_HISTORY_URL" not in body
    overview = pages_shown[0].body.decode()
    ref = re.search(r"history not readable yet; the driver&#x27;s log says why \(ref (\w+)\)",
                    overview)
    assert ref is not None, overview
    assert pages_shown[2].status == 503 and ref.group(1).encode() in pages_shown[2].body
    logged = [r.getMessage() for r in caplog.records if ref.group(1) in r.getMessage()]
    assert len(logged) == 1, logged
    assert secret in logged[0]


# --- text: right-to-left isolation, non-ASCII names through the driver -----------------------


def test_names_are_isolated_and_a_right_to_left_override_in_them_is_shown_inert(
        console: Console) -> None:
    overview = _html(console, "/", sort="name", page="1")
    assert f"<bdi>{RTL_SHOWN}</bdi>" in overview
    page = _html(console, f"/queries/{RTL_ID}")
    assert f'<h1><bdi>{RTL_SHOWN}</bdi> <span class="status status-terminated">' in page
    assert f"<title>\u2068{RTL_SHOWN}\u2069 - sparkwatch</title>" in page
    assert re.search(r"<h2>operator 0: <bdi>[^<]+</bdi></h2>", page)
    # The override itself is never served: only its escape, isolated wherever it is shown.
    assert "\u202e" not in overview and "\u202e" not in page
    assert RTL_SHOWN not in page.replace(f"<bdi>{RTL_SHOWN}</bdi>", "").replace(
        f"\u2068{RTL_SHOWN}\u2069", "")


def test_the_driver_console_opens_a_query_by_a_non_ascii_name(console: Console) -> None:
    server = serve_metrics(CollectorRegistry(), "127.0.0.1", 0, console)
    base = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(base + "/queries/caf%C3%A9-%C3%BC-1",  # noqa: S310
                                    timeout=30) as r:
            assert r.status == 200 and CAFE_ID.encode() in r.read()
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(base + "/queries/caf%E9", timeout=30)  # noqa: S310
        assert refused.value.code == 400 and b"query: " in refused.value.read()
    finally:
        server.stop()


# --- refresh=0 sticks -------------------------------------------------------------------------


def test_refresh_zero_is_kept_by_every_link_of_the_query_page(console: Console) -> None:
    html = _html(console, f"/queries/{WIDE_ID}", range="all", refresh="0", page="0")
    links = re.findall(r'href="(/queries/[^"]+)">(?!auto-refresh)', html)
    assert len(links) > len(pages.RANGES)
    assert all("refresh=0" in h for h in links), links
    assert re.search(r'<a href="[^"]*refresh=10[^"]*">auto-refresh every 10 s</a>', html)
    running = _html(console, f"/queries/{WIDE_ID}", range="all")
    stop = re.search(r'<a href="([^"]+)">stop auto-refresh</a>', running)
    assert stop is not None and "refresh=0" in stop.group(1) and "range=all" in stop.group(1)


def test_a_batches_page_keeps_refresh_in_its_newer_and_older_links() -> None:
    now = time.time()
    from sparkwatch.console.model import BatchRow

    table = [BatchRow(now - i, "r" * 8, 100 - i, 5, 1, None, None, {}, None) for i in range(50)]
    detail = QueryDetail("q", "q", "app", "running", [], {}, {}, [], [], table)
    html = pages.query_page(detail, "1h", 1, 0, 0, now)
    assert 'href="/queries/q?range=1h&amp;refresh=0#batch-table">newer</a>' in html
    assert 'href="/queries/q?range=1h&amp;refresh=0&amp;page=2#batch-table">older</a>' in html
