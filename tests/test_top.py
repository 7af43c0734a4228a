"""`sparkwatch top` without Spark: parsing an exporter's exposition (with plan identity), growth
across scrapes, sort/filter/drill keys, frames that fit the terminal, the history source in a
pseudo-terminal and --once."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bench.local import QuietHandler, served
from sparkwatch.cli.main import main
from sparkwatch.history import migrate
from sparkwatch.metrics import catalogue as cat
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo
from sparkwatch.terminal import fmt_seconds
from sparkwatch.top.history_source import read_history
from sparkwatch.top.metrics_source import read_metrics, snapshot_from_text
from sparkwatch.top.model import Snapshot, TopOperator, TopQuery
from sparkwatch.top.rates import GrowthTracker
from sparkwatch.top.render import frame
from sparkwatch.top.view import View, handle_key, visible
from tests.conftest import CANARY_TOKEN
from tests.doctor_support import SCENARIOS, events_of, load, plan_of, recorded
from tests.top_terminal import has, query_rows, quit_top, running_top, wait_frame


def exposition(names: list[str]) -> str:
    """What an exporter serves after the recorded runs of ``names`` (plans read)."""
    state = MetricState()
    for name in names:
        data = recorded(name)
        events = events_of(data)
        state.apply_all(events)
        state.apply_plan(AppInfo(**data["app"]), plan_of(data, events))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state))
    return generate_latest(registry).decode()


def test_exposition_to_snapshot_keeps_identity_and_numbers() -> None:
    snap = snapshot_from_text(exposition(["late_data", "join_no_bounds"]), "test", now=100.0)
    by_name = {q.name: q for q in snap.queries}
    late = by_name["late_data"]
    assert (late.status, late.batch_id, late.run_id != "") == ("terminated", 6, True)
    [op] = late.operators
    assert (op.index, op.operator, op.kind, op.rows) == (0, "stateStoreSave", "aggregation", 3)
    assert op.identity == "aggregation on [window, key], append, watermark ts 2s, 2 stores, hdfs"
    assert by_name["join_no_bounds"].operators[0].identity.startswith(
        "stream_stream_join on [key], append, no watermark"
    )


def query(name: str, **values: Any) -> TopQuery:
    ops = values.pop("ops", [])
    return TopQuery(app_id="a", query_id=f"id-{name}", name=name, operators=ops, **values)


def test_growth_is_measured_across_scrapes_and_resets_with_the_run() -> None:
    tracker = GrowthTracker(window=60)

    def snap(t: float, rows: float, run: str = "r1") -> TopOperator:
        op = TopOperator(index=0, operator="dedupe", rows=rows)
        q = query("q", run_id=run, ops=[op])
        tracker.update(Snapshot("s", t, [q]))
        return op

    assert snap(0, 100).growth is None
    assert snap(10, 150).growth == 5.0
    assert snap(20, 150).growth == 2.5  # over the window, not the last second
    assert snap(30, 10, run="r2").growth is None  # a restart is not negative growth


def test_keys_sort_filter_select_and_drill() -> None:
    queries = [
        query("alpha", batch_seconds=1.0, lag_seconds=50.0,
              ops=[TopOperator(0, "dedupe", kind="dedupe", rows=10, growth=1.0)]),
        query("beta", batch_seconds=3.0, lag_seconds=5.0,
              ops=[TopOperator(0, "stateStoreSave", kind="aggregation", rows=99, growth=0.0)]),
        query("gamma", batch_seconds=2.0,
              ops=[TopOperator(0, "symmetricHashJoin", rows=5, growth=7.0)]),
    ]
    view = View()
    order = {key: None for key in "glbsn"}
    for key in order:
        handle_key(view, key, queries)
        order[key] = [q.name for q in visible(queries, view)]
    assert order == {
        "g": ["gamma", "alpha", "beta"],
        "l": ["alpha", "beta", "gamma"],
        "b": ["beta", "gamma", "alpha"],
        "s": ["beta", "alpha", "gamma"],
        "n": ["alpha", "beta", "gamma"],
    }
    for key in ["/", "a", "g", "g", "BACKSPACE", "ENTER"]:  # filter "ag" (typing does not sort)
        handle_key(view, key, visible(queries, view))
    assert (view.filter, view.sort, [q.name for q in visible(queries, view)]) == (
        "ag", "name", ["beta"]  # matches its operator's kind, aggregation
    )
    handle_key(view, "ESC", [])
    shown = visible(queries, view)
    handle_key(view, "DOWN", shown)
    handle_key(view, "ENTER", shown)
    assert view.detail == ("a", "id-beta")
    lines = frame(Snapshot("s", 0.0, queries), view, 100)
    assert "query beta" in lines[3] and "(esc: back to the list)" in lines[-1]
    handle_key(view, "ESC", shown)
    handle_key(view, "q", shown)
    assert view.detail is None and view.quit


def test_the_mark_follows_its_query_through_a_re_sort_and_enter_opens_it() -> None:
    queries = [query("alpha", batch_seconds=1.0), query("beta", batch_seconds=3.0),
               query("gamma", batch_seconds=2.0)]
    view = View(sort="name")
    handle_key(view, "DOWN", visible(queries, view))  # beta marked
    handle_key(view, "b", visible(queries, view))  # by batch time: beta moves to the top
    shown = visible(queries, view)
    assert [q.name for q in shown] == ["beta", "gamma", "alpha"]
    assert [line[:8] for line in frame(Snapshot("s", 0.0, queries), view, 100)
            if line.startswith(">")] == ["> beta  "]
    handle_key(view, "ENTER", shown)
    assert view.detail == ("a", "id-beta")


def test_a_long_list_scrolls_to_keep_the_marked_query_on_screen() -> None:
    queries = [query(f"q{i:02}", batch_seconds=1.0) for i in range(30)]
    view = View(sort="name")
    for _ in range(20):
        handle_key(view, "DOWN", visible(queries, view))
    lines = frame(Snapshot("s", 0.0, queries), view, 80, height=24)
    assert len(lines) == 24 and any(line.startswith("> q20") for line in lines)
    assert lines[-1].startswith("... ") and "above" in lines[-1]


def test_last_batch_columns_come_from_the_counters_when_the_profile_has_no_gauges() -> None:
    tracker = GrowthTracker()

    def seen(t: float, batch: int, totals: tuple[float, float, float]) -> TopOperator:
        op = TopOperator(index=0, operator="dedupe", rows=10, totals=totals)
        tracker.update(Snapshot("s", t, [query("q", run_id="r1", batch_id=batch, ops=[op])]))
        return op

    assert seen(0, 4, (100, 10, 0)).updated is None  # one batch seen: nothing to difference
    op = seen(1, 5, (130, 14, 2))  # the next batch: exactly what it did
    assert (op.updated, op.removed, op.dropped) == (30, 4, 2)
    op = seen(2, 5, (130, 14, 2))  # the same batch again: still shown
    assert (op.updated, op.removed, op.dropped) == (30, 4, 2)
    op = seen(3, 8, (190, 20, 2))  # three batches between scrapes: their mean
    assert (op.updated, op.removed, op.dropped) == (20, 2, 0)


def test_a_default_profile_exposition_fills_the_counters_top_differences() -> None:
    from sparkwatch.metrics.profiles import from_settings
    from sparkwatch.settings import ListenerSettings

    state = MetricState()
    data = recorded("late_data")
    events = events_of(data)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SparkwatchCollector(state, selection=from_settings(ListenerSettings())))
    tracker, snaps = GrowthTracker(), []
    for i, e in enumerate(events):
        state.apply(e)
        if i >= len(events) - 3:
            text = generate_latest(registry).decode()
            snaps.append(tracker.update(snapshot_from_text(text, "m", now=float(i))))
    assert "spark_streaming_state_last_batch_rows_updated" not in text
    op = snaps[-1].queries[0].operators[0]
    assert op.totals is not None and op.updated is not None and op.updated >= 0


@pytest.mark.parametrize("width", [40, 80, 200])
def test_frames_fit_the_terminal(width: int) -> None:
    snap = snapshot_from_text(exposition(SCENARIOS), "http://driver:9750/metrics")
    snap.error = "URLError: <urlopen error [Errno 111] Connection refused>"
    lines = frame(snap, View(filter="a", editing=True), width, height=12)
    assert len(lines) <= 12 and all(len(line) <= width for line in lines)
    assert lines[2].startswith("! cannot read")


def test_history_source_and_once(sqlite_url: str, capsys) -> None:
    migrate.upgrade(sqlite_url)
    load(sqlite_url, SCENARIOS)
    snap = read_history(sqlite_url)
    join = next(q for q in snap.queries if q.name == "join_no_bounds")
    assert (join.status, join.batch_id, join.operators[0].rows) == ("terminated", 5, 96)
    assert join.operators[0].growth is not None and join.operators[0].growth > 0
    assert main(["top", "--url", sqlite_url, "--once", "--sort", "rows", "--filter", "late"]) == 0
    out = capsys.readouterr().out
    assert "5 queries (1 shown) - sort: rows - filter: late" in out
    assert [row[0] for row in query_rows(out.splitlines())] == ["late_data"]


def test_unreachable_metrics_once_exits_2(capsys) -> None:
    assert read_metrics("http://127.0.0.1:9/metrics").error is not None
    assert main(["top", "--metrics", "127.0.0.1:9", "--once"]) == 2
    # The error on stderr, in one line; stdout (a pipe into a parser) gets nothing.
    assert capsys.readouterr() == (
        "", "sparkwatch top: error: cannot read http://127.0.0.1:9/metrics: Connection refused\n")


def test_once_on_an_unreadable_history_is_an_error_on_stderr(tmp_path, capsys) -> None:
    assert main(["top", "--url", f"sqlite:///{tmp_path}/absent.db", "--once"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err == (f"sparkwatch top: error: cannot read sqlite:///{tmp_path}/absent.db: no "
                   f"history database at {tmp_path}/absent.db (set --url or "
                   "SPARKWATCH_HISTORY_URL, or create it with `sparkwatch db upgrade`)\n")


def test_history_in_a_pseudo_terminal(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url)
    load(sqlite_url, SCENARIOS)
    with running_top("--url", sqlite_url, "--interval", "0.3") as child:
        lines = wait_frame(child, has("QUERY / OPERATOR"), "the table", timeout=30)
        assert len(query_rows(lines)) == 5
        child.send("l")
        lines = wait_frame(child, lambda ls: "sort: lag" in ls[0], "sort by lag", timeout=30)
        child.send("/join\r")
        lines = wait_frame(child, lambda ls: "filter: join" in ls[0], "the filter", timeout=30)
        assert [row[0] for row in query_rows(lines)] == ["join_no_bounds"]
        child.send("\r")
        wait_frame(child, has("#0 symmetricHashJoin: stream_stream_join on [key]"), "detail")
        assert quit_top(child) == 0



def top_error(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``top``'s exit status and its stderr, which must be one line and no traceback."""
    code = main(["top", *argv])
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and "Traceback" not in out + err, out + err
    return code, err.strip()


@pytest.mark.parametrize("interval", ["inf", "1e300", "nan", "0", "-2", "86401"])
def test_an_interval_that_is_not_a_number_of_seconds_up_to_a_day_is_refused(
        interval: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = top_error(capsys, "--once", "--metrics", "127.0.0.1:9", "--interval", interval)
    assert (code, err) == (
        2, "sparkwatch top: error: --interval must be a number of seconds > 0 and at most 86400")


@pytest.mark.parametrize(("option", "url"), [
    ("--metrics", "http://[::1"), ("--metrics", "http://127.0.0.1:port/metrics"),
    ("--collector", "http://[::1"), ("--collector", "127.0.0.1:99999"),
])
def test_a_source_url_that_does_not_parse_is_one_line_naming_the_option(
        option: str, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = top_error(capsys, "--once", option, url)
    assert (code, err) == (
        2, f"sparkwatch top: error: {option} is not a valid URL: expected http://host:port")


def test_a_failed_read_is_shown_without_the_exceptions_text() -> None:
    # http.client refuses this header with a ValueError quoting it, token and all.
    snap = read_metrics("http://127.0.0.1:9/metrics", f"{CANARY_TOKEN}\r\nX-Evil: 1")
    assert snap.error == "not a valid URL or header"
    refused = read_metrics("http://127.0.0.1:9/metrics", CANARY_TOKEN)
    assert refused.error == "Connection refused"


def test_nan_and_infinite_values_show_as_no_value_in_the_frame() -> None:
    """NaN is a legal exposition value ("unknown"): it and the infinities traced back in top's
    number formats (int(NaN), inf // 3600)."""
    text = exposition(["late_data"])
    lines = text.splitlines()
    odd = {cat.QUERY_BATCH_ID.name: "NaN", cat.STATE_ROWS.name: "+Inf",
           cat.QUERY_WATERMARK_LAG.name: "-Inf", cat.QUERY_EVENT_TIME_LAG.name: "NaN"}
    for i, line in enumerate(lines):
        name = line.split("{")[0]
        if name in odd:
            lines[i] = line.rsplit(" ", 1)[0] + " " + odd[name]
    snap = snapshot_from_text("\n".join(lines) + "\n", "test", now=100.0)
    [late] = snap.queries
    assert (late.batch_id, late.lag_seconds, late.operators[0].rows) == (None, None, None)
    row = next(r for r in query_rows(frame(snap, View(), 120)) if r[0] == "late_data")
    assert row[1:5] == ["terminated", "-", row[3], "-"], row


@pytest.mark.parametrize(("value", "shown"), [
    (float("nan"), "-"), (float("inf"), "-"), (-5.0, "-5.0s"), (-3700.0, "-1h01m"),
])
def test_a_duration_that_is_no_number_or_negative_is_shown_as_such(value: float,
                                                                   shown: str) -> None:
    assert fmt_seconds(value) == shown


@pytest.mark.parametrize(("body", "why"), [
    (b"\xff\xfe\x00", "bytes that are no UTF-8 text"),
    (b"{}", "a line that is no sample"),
])
def test_an_answer_that_is_no_exposition_is_named_as_such(body: bytes, why: str,
                                                           capsys) -> None:
    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.answer(200, body, "text/plain")

    with served(Handler) as base:
        url = f"{base}/metrics"
        assert main(["top", "--metrics", url, "--once"]) == 2
    # It was "not a valid URL or header" for the one, "ValueError: " for the other.
    assert capsys.readouterr().err == (f"sparkwatch top: error: cannot read {url}: answered "
                                       f"something other than a Prometheus exposition ({why})\n")
