"""The listener's history sink against real databases: it writes in batches, survives a database
that is down, and gives up cleanly on a URL that can never work."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from sparkwatch.history.writer import HistoryWriter
from sparkwatch.listener.attach import _history_sink
from sparkwatch.listener.history_sink import HistorySink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import AppInfo, Envelope, EventKind, QueryProgress
from sparkwatch.model.parse import parse_envelope
from sparkwatch.settings import ListenerSettings
from tests.conftest import FIXTURES
from tests.support import wait_for

APP = AppInfo("app", "app-1", "4.3.0")


def events() -> list:
    out = []
    for path in sorted(FIXTURES.glob("history/*.json")):
        data = json.loads(path.read_text())
        for payload in data if isinstance(data, list) else [data]:
            out.append(parse_envelope(Envelope(EventKind.PROGRESS, APP, 0.0, payload)))
    return out


def test_every_event_offered_is_written_once(history_url: str) -> None:
    counters = ListenerCounters()
    sink = HistorySink(HistoryWriter(history_url), counters, capacity=100, batch_size=4,
                       flush_seconds=0.05)
    batch = events()
    for e in batch + batch:  # a retried delivery must not double the rows
        sink(e)
    assert sink.flush(60)
    sink.stop(5)
    engine = sa.create_engine(history_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("select count(*) from batches")).scalar() == len(batch)
    engine.dispose()
    assert counters.dropped == {} and counters.delivery_failures == {}



def test_an_event_the_database_refuses_is_dropped_and_the_rest_written(
    history_url: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """A value the database cannot store (an operator's row count over 64 bits, built past the
    listener's contract, which would make it fit) fails its batch on every attempt: that one
    event is dropped, counted and logged, and every event before and after it is written."""
    batch = events()
    bad = batch[1]
    assert isinstance(bad.event, QueryProgress) and bad.event.state_operators
    op = replace(bad.event.state_operators[0], num_rows_total=2**64)
    poison = replace(bad, event=replace(bad.event, state_operators=(op,)))
    counters = ListenerCounters()
    sink = HistorySink(HistoryWriter(history_url), counters, capacity=100, batch_size=4,
                       flush_seconds=0.05)
    for e in [batch[0], poison, *batch[2:]]:
        sink(e)
    assert sink.flush(60)
    sink.stop(5)
    engine = sa.create_engine(history_url)
    with engine.connect() as conn:
        written = set(conn.execute(sa.text("select run_id, batch_id from batches")).all())
    engine.dispose()
    assert written == {(e.event.run_id, e.event.batch_id) for e in batch} - {
        (bad.event.run_id, bad.event.batch_id)}
    assert counters.dropped == {"history": 1} and counters.delivery_failures == {"history": 1}
    [refused] = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert f"progress event of query {bad.event.query_id}, dropped" in refused


def test_a_stop_ends_as_lost_the_runs_it_saw_start_and_never_end(history_url: str) -> None:
    """Detached (session stopping, driver exiting on a signal) before Spark said the queries
    ended: nothing will write their end, so the sink does; a run seen terminated keeps its
    status."""
    progress = events()
    ended = next(e for e in progress if e.event.run_id != progress[0].event.run_id)
    terminated = parse_envelope(Envelope(EventKind.TERMINATED, APP, 0.0, {
        "id": ended.event.query_id, "runId": ended.event.run_id, "exception": None}))
    sink = HistorySink(HistoryWriter(history_url), ListenerCounters(), capacity=100,
                       batch_size=4, flush_seconds=0.05)
    for e in [*progress, terminated]:
        sink(e)
    sink.stop(30)
    engine = sa.create_engine(history_url)
    with engine.connect() as conn:
        statuses = dict(conn.execute(sa.text("select run_id, status from query_runs")).all())
    engine.dispose()
    assert statuses.pop(ended.event.run_id) == "terminated"
    assert statuses and set(statuses.values()) == {"lost"}


def test_an_unusable_url_disables_the_history_and_counts_what_it_could_not_keep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counters = ListenerCounters()
    sink = HistorySink(HistoryWriter("mysql://nobody@127.0.0.1/x"), counters, capacity=10,
                       batch_size=2, flush_seconds=0.01)
    with caplog.at_level(logging.ERROR, logger="sparkwatch"):
        for e in events()[:5]:
            sink(e)
        wait_for(lambda: counters.dropped.get("history", 0) == 5, 10,
                 "all five counted as dropped")
    assert counters.delivery_failures == {"history": 1}
    sink.stop(2)
    # The URL is found wrong on the writer's thread, long after attach read it: the line names
    # the setting it came from.
    [said] = [r.getMessage() for r in caplog.records if "history disabled" in r.getMessage()]
    assert said.startswith("sparkwatch: history disabled (SPARKWATCH_HISTORY_URL or "
                           "spark.sparkwatch.history.url): unsupported database 'mysql'"), said


def test_a_listener_without_a_collector_keeps_the_rollups_current(history_url: str) -> None:
    """The sink attach() builds rolls up what it wrote on its own thread, while idle too, so the
    History dashboard's rollup panels work with no collector."""
    now = datetime.now(UTC)
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    fresh = [parse_envelope(Envelope(EventKind.PROGRESS, APP, now.timestamp(),
                                     {**e.envelope.payload, "timestamp": stamp})) for e in events()]
    settings = ListenerSettings(history_url=history_url, history_rollup_seconds=0.2)
    sink = _history_sink(settings, ListenerCounters())
    try:
        for e in fresh:
            sink(e)
        assert sink.flush(60)
        engine = sa.create_engine(history_url)

        def rolled_up() -> int:
            with engine.connect() as conn:
                return int(conn.execute(sa.text(
                    "select coalesce(sum(batches), 0) from query_rollups "
                    "where resolution = 'hour'")).scalar_one())

        wait_for(lambda: rolled_up() == len(fresh), 30, "hour rollups of every batch written")
        with engine.connect() as conn:
            claimed = conn.execute(sa.text(
                "select replica from job_runs where job = 'rollups'")).scalars().all()
        engine.dispose()
        assert claimed and all(r.startswith("listener-") for r in claimed)
    finally:
        sink.stop(5)
