"""Control and bidi characters in what Spark reports (query, app and operator names, a run's
error), on the console's pages, on SQLite and PostgreSQL and from the live state: each is shown
as its escape (``\\x1b``, ``\\u202e``), as a terminal shows it, and none reaches the page raw; a
query so named still opens from its link and by its name."""

from __future__ import annotations

import html as html_text
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import pytest
from prometheus_client import CollectorRegistry

from sparkwatch.console import pages
from sparkwatch.console.app import Console
from sparkwatch.console.model import BatchRow, QueryCounts, QueryDetail, QueryRow, RunRow
from sparkwatch.console.svg import Series, line_chart
from sparkwatch.listener.exporter import serve_metrics
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo, Envelope, EventKind, ParsedEvent
from sparkwatch.model.parse import parse_envelope
from tests.test_console_pages import _html
from tests.test_history_reader import AGG
from tests.test_history_support import batch_of, migrated_database, write

QUERY_ID = "c0000000-0000-4000-8000-00000000001b"
# ESC and a colour sequence, BEL, backspace, DEL, C1 (NEL, CSI), a right-to-left override that
# makes "gnp.exe" read "exe.png", stray isolates, and tab, CR and LF.
NAME = "job\x1b[31m\x07\x08\x7f\x85\x9b\u202egnp.exe\u2066x\u2069\t\r\n-end"
NAME_SHOWN = ("job\\x1b[31m\\x07\\x08\\x7f\\x85\\x9b\\u202egnp.exe\\u2066x\\u2069"
              "\\x09\\x0d\\x0a-end")
APP_NAME = "etl\x1b]0;owned\x07\u202b-app"
APP_SHOWN = "etl\\x1b]0;owned\\x07\\u202b-app"
OPERATOR = "stateStoreSave\x1b[2K\u202d"
OPERATOR_SHOWN = "stateStoreSave\\x1b[2K\\u202d"
ERROR = "boom\x1b[2J\x00\u2067 in stage 3"
ERROR_SHOWN = "boom\\x1b[2J\\u2067 in stage 3"
"""NUL is refused by the contract (PostgreSQL cannot hold it), so the history has the rest."""
APP = AppInfo(name=APP_NAME, id="app-20261121093000-0027", spark_version="4.3.0")

RAW = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
"""Every character no served page may hold raw: C0, DEL, C1, bidi embeddings, overrides and
isolates, lone surrogates."""


def _event(kind: EventKind, payload: dict[str, Any]) -> ParsedEvent:
    return parse_envelope(Envelope(kind, APP, datetime.now(UTC).timestamp(), payload))


def _events() -> list[ParsedEvent]:
    at = "2026-11-21T09:00:00.000Z"
    raw = batch_of(AGG, 0, at, id=QUERY_ID, runId=QUERY_ID, name=NAME)
    raw["stateOperators"] = [{**raw["stateOperators"][0], "operatorName": OPERATOR}]
    return [
        _event(EventKind.STARTED, {"id": QUERY_ID, "runId": QUERY_ID, "name": NAME,
                                   "timestamp": at}),
        _event(EventKind.PROGRESS, raw),
        _event(EventKind.TERMINATED, {"id": QUERY_ID, "runId": QUERY_ID,
                                      "exception": ERROR.replace("\x00", ""),
                                      "errorClassOnException": None}),
    ]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def history_db(request: pytest.FixtureRequest) -> Iterator[str]:
    for url in migrated_database(request):
        write(url, *_events())
        yield url


def _served_raw(page: str) -> list[str]:
    """The raw characters of ``page`` that should not be there. The query page's title isolates
    the (escaped) name with one FSI ... PDI of its own: those two are ours, not the name's."""
    title = re.search(r"<title>(.*?)</title>", page)
    assert title is not None
    shown = title.group(1)
    if shown.startswith("\u2068"):
        assert shown.endswith("\u2069 - sparkwatch")
        shown = shown[1:-len("\u2069 - sparkwatch")] + " - sparkwatch"
    return RAW.findall(page[:title.start(1)] + shown + page[title.end(1):])


def test_names_with_control_and_bidi_characters_are_escapes_on_the_overview(
        console: Console) -> None:
    page = _html(console, "/", refresh="0")
    assert _served_raw(page) == []
    assert f'<a class="query" href="/queries/{QUERY_ID}?refresh=0"><bdi>{NAME_SHOWN}</bdi></a>' \
        in page
    assert f"<td><bdi>{APP_SHOWN}</bdi></td>" in page


def test_names_and_errors_with_control_and_bidi_characters_are_escapes_on_the_query_page(
        console: Console) -> None:
    page = _html(console, f"/queries/{QUERY_ID}", range="all")
    assert _served_raw(page) == []
    assert f"<title>\u2068{NAME_SHOWN}\u2069 - sparkwatch</title>" in page
    assert f"<h1><bdi>{NAME_SHOWN}</bdi> " in page
    assert f"app <bdi>{APP_SHOWN}</bdi>" in page
    assert f"<h2>operator 0: <bdi>{OPERATOR_SHOWN}</bdi></h2>" in page
    assert f"<td><bdi>{ERROR_SHOWN}</bdi></td>" in page


def test_a_query_named_with_control_characters_opens_from_its_link_and_by_its_name(
        console: Console) -> None:
    """Through the driver's server: the link is the id, percent-encoded as it is; the name,
    percent-encoded raw (not as it is shown), opens the same page."""
    server = serve_metrics(CollectorRegistry(), "127.0.0.1", 0, console)
    base = f"http://127.0.0.1:{server.port}"
    try:
        with urllib.request.urlopen(base + "/?refresh=0", timeout=30) as r:  # noqa: S310
            overview = r.read().decode()
        row = re.search(rf'data-query-id="{QUERY_ID}"><td><a class="query" href="([^"]+)">',
                        overview)
        assert row is not None
        for path in (html_text.unescape(row.group(1)),
                     "/queries/" + quote(NAME, safe="") + "?range=all"):
            with urllib.request.urlopen(base + path, timeout=30) as r:  # noqa: S310
                assert r.status == 200
                page = r.read().decode()
            assert f"query <bdi>{QUERY_ID}</bdi>" in page
            assert f"<h1><bdi>{NAME_SHOWN}</bdi> " in page and _served_raw(page) == []
    finally:
        server.stop()


def test_live_names_with_control_characters_are_escapes_without_a_history() -> None:
    state = MetricState()
    for event in _events()[:2]:
        state.apply(event)
    live = Console(None, lambda _tenant: [state])
    overview = _html(live, "/")
    page = _html(live, f"/queries/{QUERY_ID}")
    for shown in (overview, page):
        assert _served_raw(shown) == []
        assert f"<bdi>{NAME_SHOWN}</bdi>" in shown and f"<bdi>{APP_SHOWN}</bdi>" in shown
    assert f"<h2>operator 0: <bdi>{OPERATOR_SHOWN}</bdi></h2>" in page


def test_nul_and_a_lone_surrogate_reaching_a_page_are_escapes_and_the_page_encodes() -> None:
    """The contract keeps both out of events; a page still never serves them raw (a lone
    surrogate would make the page's UTF-8 encoding fail: a 500)."""
    name = "a\x00b\ud800c"
    now = datetime(2026, 11, 21, tzinfo=UTC).timestamp()
    batch = BatchRow(now, "r\x00", 1, 5, 1, None, None, {}, None)
    detail = QueryDetail("q", name, "app\x00", "failed", [batch], {}, {0: "op\ud800"}, [],
                         [RunRow("r\x00", "failed", now, now, 1, 1, 1, "err\x00\ud801")],
                         [batch], operator_indexes=[0])
    overview = pages.overview([QueryRow("q", name, "app\x00", "failed")], "status", False, 0,
                              ["note\x00"], QueryCounts(1, 0, 1), now=now)
    for page in (pages.query_page(detail, "all", 0, 0, 0, now), overview):
        page.encode()
        assert _served_raw(page) == []
        assert "<bdi>a\\x00b\\ud800c</bdi>" in page and "<bdi>app\\x00</bdi>" in page


def test_chart_titles_and_series_labels_are_escapes_in_the_svg() -> None:
    chart = line_chart("rows\x1b[5m", "", [Series("in\u202e\x07", [(1.0, 2.0), (2.0, 3.0)])])
    assert RAW.findall(chart) == []
    assert 'aria-label="rows\\x1b[5m"><title>rows\\x1b[5m</title>' in chart
    assert "<title>in\\u202e\\x07: last 3</title>" in chart
    assert "</span>in\\u202e\\x07</span>" in chart
