"""The writer is idempotent on Spark's keys and keeps run rows right in any event order."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.errors import HistoryUnavailable, HistoryUrlError
from sparkwatch.history.writer import HistoryWriter
from tests.test_history_support import (
    batch_of,
    counts,
    fetch,
    idle,
    load_sample,
    progress,
    started,
    terminated,
    utc,
    write,
    writer,
)

RAW = load_sample("window_agg")
QUERY, RUN = RAW["id"], RAW["runId"]


def _run_lifecycle() -> list:
    return [
        started(QUERY, RUN, "window_agg", "2026-11-21T09:33:00.000Z"),
        progress(batch_of(RAW, 7, "2026-11-21T09:33:50.000Z")),
        progress(batch_of(RAW, 8, "2026-11-21T09:33:52.000Z")),
        idle(QUERY, RUN, "2026-11-21T09:34:30.000Z"),
        terminated(QUERY, RUN, "2026-11-21T09:35:00.000Z", "boom\nat Foo", "STREAM_FAILED"),
    ]


def test_writing_the_same_events_twice_leaves_one_row_each(history_url: str) -> None:
    events = _run_lifecycle()
    write(history_url, *events)
    first = fetch(history_url, "query_runs")
    write(history_url, *events)
    assert counts(history_url) == {
        "query_runs": 1,
        "batches": 2,
        "operator_batches": 2,
        "source_batches": 2,
        "sink_batches": 2,
    }
    assert fetch(history_url, "query_runs") == first


def run_batches(url: str) -> list[int]:
    return [row["batches"] for row in fetch(url, "query_runs")]


def test_a_run_counts_each_of_its_batches_once_whatever_is_replayed(history_url: str) -> None:
    """The count the queries page shows (migration 0007) equals the run's rows, through new
    batches (COPY on PostgreSQL, positional tuples on SQLite), a write overlapping an earlier
    one (INSERT ... ON CONFLICT) and a whole replay."""
    first, second, third = (progress(batch_of(RAW, i, f"2026-11-21T09:3{i}:00.000Z"))
                            for i in (1, 2, 3))
    write(history_url, first, second)
    assert run_batches(history_url) == [2]
    write(history_url, second, third)
    assert run_batches(history_url) == [3]
    write(history_url, first, second, third)
    assert run_batches(history_url) == [counts(history_url)["batches"]] == [3]


def test_a_batch_repeated_within_one_write_is_one_row(history_url: str) -> None:
    event = progress(RAW)
    write(history_url, event, event)
    assert counts(history_url)["batches"] == 1
    assert counts(history_url)["operator_batches"] == 1


def test_run_lifecycle_is_recorded(history_url: str) -> None:
    write(history_url, *_run_lifecycle())
    [run] = fetch(history_url, "query_runs")
    assert run["started_at"] == utc("2026-11-21T09:33:00.000Z")
    # QueryTerminated has no timestamp: the envelope's received_at is the end.
    assert run["ended_at"] == utc("2026-11-21T09:35:00.000Z")
    assert run["last_event_at"] == utc("2026-11-21T09:35:00.000Z")
    assert (run["status"], run["exception"], run["error_class"]) == (
        "failed",
        "boom\nat Foo",
        "STREAM_FAILED",
    )
    assert run["name"] == "window_agg"
    assert run["job_tags"] == []


def test_events_in_separate_writes_build_the_same_run(history_url: str) -> None:
    for event in _run_lifecycle():
        write(history_url, event)
    [run] = fetch(history_url, "query_runs")
    assert run["status"] == "failed"
    assert run["started_at"] == utc("2026-11-21T09:33:00.000Z")
    assert run["ended_at"] == utc("2026-11-21T09:35:00.000Z")


def test_replayed_start_and_progress_do_not_reopen_a_terminated_run(history_url: str) -> None:
    events = _run_lifecycle()
    write(history_url, *events)
    write(history_url, events[0], events[1])
    [run] = fetch(history_url, "query_runs")
    assert run["status"] == "failed"
    assert run["ended_at"] == utc("2026-11-21T09:35:00.000Z")
    assert run["last_event_at"] == utc("2026-11-21T09:35:00.000Z")


@pytest.mark.parametrize("separately", [False, True], ids=["one-write", "a-write-each"])
def test_an_end_stamped_before_the_run_s_events_ends_it_at_its_latest(
        history_url: str, separately: bool) -> None:
    """A driver's clock stepping back between a progress (Spark's time) and the end (the
    listener's), or a made-up time: never a run that ends before it ran."""
    events = [started(QUERY, RUN, "window_agg", "2026-11-21T09:33:00.000Z"),
              progress(batch_of(RAW, 7, "2026-11-21T09:33:50.000Z")),
              terminated(QUERY, RUN, "2026-11-21T09:00:00.000Z")]
    for write_of in ([[e] for e in events] if separately else [events]):
        write(history_url, *write_of)
    [run] = fetch(history_url, "query_runs")
    assert run["status"] == "terminated"
    assert run["ended_at"] == run["last_event_at"] == utc("2026-11-21T09:33:50.000Z")


def test_a_start_stored_after_the_end_moves_the_end_to_it(history_url: str) -> None:
    write(history_url, terminated(QUERY, RUN, "2026-11-21T09:35:00.000Z"))
    write(history_url, started(QUERY, RUN, "window_agg", "2026-11-21T09:36:00.000Z"))
    [run] = fetch(history_url, "query_runs")
    assert run["status"] == "terminated"
    assert run["started_at"] == run["ended_at"] == utc("2026-11-21T09:36:00.000Z")


def test_clean_stop_is_terminated_without_error(history_url: str) -> None:
    write(history_url, progress(RAW), terminated(QUERY, RUN, "2026-11-21T09:40:00.000Z"))
    [run] = fetch(history_url, "query_runs")
    assert (run["status"], run["exception"], run["error_class"]) == ("terminated", None, None)


def test_progress_of_a_run_never_started_creates_the_run(history_url: str) -> None:
    """The listener attached after the query started: no QueryStarted, still a run row."""
    write(history_url, progress(RAW))
    [run] = fetch(history_url, "query_runs")
    assert (run["run_id"], run["query_id"], run["name"]) == (RUN, QUERY, "window_agg")
    assert (run["status"], run["started_at"], run["ended_at"]) == ("running", None, None)
    assert run["last_event_at"] == utc(RAW["timestamp"])


def test_a_late_start_event_fills_in_the_start_time(history_url: str) -> None:
    write(history_url, progress(RAW))
    write(history_url, started(QUERY, RUN, "window_agg", "2026-11-21T09:30:00.000Z"))
    [run] = fetch(history_url, "query_runs")
    assert run["started_at"] == utc("2026-11-21T09:30:00.000Z")
    # The start is older than the progress already seen: the last event time stays.
    assert run["last_event_at"] == utc(RAW["timestamp"])


def test_idle_only_moves_the_last_event_time(history_url: str) -> None:
    write(history_url, progress(RAW))
    write(history_url, idle(QUERY, RUN, "2026-11-21T10:00:00.000Z"))
    [run] = fetch(history_url, "query_runs")
    assert run["last_event_at"] == utc("2026-11-21T10:00:00.000Z")
    assert run["status"] == "running"
    assert counts(history_url)["batches"] == 1


def test_a_failed_write_can_be_retried_with_the_same_events(sqlite_url: str) -> None:
    events = _run_lifecycle()
    with writer(sqlite_url) as w:
        w._migrate = False  # no schema yet: the write fails like a database outage would
        with pytest.raises(sa.exc.OperationalError):
            w.write(events)
        migrate.upgrade(sqlite_url)
        w.write(events)
    assert counts(sqlite_url)["batches"] == 2
    assert fetch(sqlite_url, "query_runs")[0]["status"] == "failed"


def test_writer_touches_nothing_until_the_first_write() -> None:
    w = HistoryWriter("postgresql+psycopg://postgres@127.0.0.1:1/x")
    w.write([])
    with pytest.raises(HistoryUnavailable, match="cannot connect"):
        w.write([progress(RAW)])
    w.close()


def test_writer_reports_an_unusable_url_as_such() -> None:
    with pytest.raises(HistoryUrlError, match="unsupported database 'mysql'"):
        HistoryWriter("mysql://user@host/db").write([progress(RAW)])


def test_times_are_timezone_aware_utc(history_url: str) -> None:
    write(history_url, progress(RAW))
    [batch] = fetch(history_url, "batches")
    assert isinstance(batch["timestamp"], datetime)
    assert batch["timestamp"].utcoffset().total_seconds() == 0
