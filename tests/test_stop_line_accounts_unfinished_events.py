"""The stop line accounts for every event received: an event a stage still held at the stop's
deadline (queued, or in the middle of a write) is said as unfinished, neither delivered nor
dropped, and is not counted dropped when its write then ends after all."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa
from prometheus_client import CollectorRegistry

from sparkwatch.history.writer import HistoryWriter
from sparkwatch.listener.announce import stop_line
from sparkwatch.listener.attach import Attachment, _history_sink
from sparkwatch.listener.history_sink import HistorySink
from sparkwatch.listener.intake import Intake
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import AppInfo, EventKind, ParsedEvent
from sparkwatch.model.parse import listener_event
from sparkwatch.settings import load_listener_settings
from tests.conftest import FIXTURES
from tests.support import wait_for

APP = AppInfo("app", "app-1", "4.3.0")


def started(query_id: str) -> str:
    """Spark 4.3's JSON of a query's start as recorded, for ``query_id`` (a run of its own)."""
    doc = json.loads((FIXTURES / "spark-4.3.0" / "dedupe_hdfs.json").read_text())["started"]
    return json.dumps({**doc, "id": query_id, "runId": f"run-of-{query_id}"})


def attachment(history_url: str) -> Attachment:
    """An attachment of its real stages (intake and history writer), without a Spark session."""
    settings = load_listener_settings({}, {}, history_url=history_url, history_batch_size=1,
                                      history_flush_seconds=0.01, metrics_enabled=False)
    att = Attachment(settings, APP, CollectorRegistry(auto_describe=False))
    att.history = _history_sink(settings, att.counters)
    att.intake = Intake(APP, 10, att.counters, [("history", att.history)])
    att._announced = True  # as _attach() sets it once the attach line is said
    return att


def test_an_event_whose_write_is_blocked_at_the_stop_deadline_is_said_unfinished_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "history.db"
    att = attachment(f"sqlite:///{path}")
    sink, intake = att.history, att.intake
    assert sink is not None and intake is not None
    intake.offer(EventKind.STARTED, started("q-written"))
    assert intake.flush(30) and sink.flush(60)  # written: the schema is there too
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")  # the writer now waits for the lock (60 s)
        intake.offer(EventKind.STARTED, started("q-blocked"))
        assert intake.flush(30)
        wait_for(lambda: sink.queue_state()[0] == 0, 30, "the history writer to take the event")
        att.detach(timeout=1.0)  # far shorter than the writer's wait for the lock
        said = capsys.readouterr().err.splitlines()
        assert said == ["sparkwatch stopped for app-1: 2 events received, 0 dropped, "
                        "1 unfinished at the stop deadline"]
        assert sink.worker.is_alive(), "the write was still waiting for the lock"
    finally:
        holder.rollback()
        holder.close()
    # Left to its daemon thread, the write ends once the lock is free: written, not dropped.
    wait_for(lambda: not sink.worker.is_alive(), 70, "the history writer to end")
    assert att.counters.dropped == {}
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        queries = set(conn.execute(sa.text("select query_id from query_runs")).scalars())
    engine.dispose()
    assert queries == {"q-written", "q-blocked"}


def test_the_stop_line_names_unfinished_events_only_when_there_are_some() -> None:
    assert stop_line("app-1", 3, 2, unfinished=1) == (
        "sparkwatch stopped for app-1: 3 events received, 2 dropped, 1 unfinished at the stop "
        "deadline")
    assert stop_line("app-1", 3, 3, unfinished=0) == (
        "sparkwatch stopped for app-1: 3 events received, 3 dropped")
    assert stop_line("app-1", 3, 2, 7, unfinished=1) == (
        "sparkwatch stopped for app-1: 3 events received, 2 dropped, 1 unfinished at the stop "
        "deadline (Spark's listener bus dropped 7 events for all listeners)")


def test_a_stage_busy_at_its_stop_holds_the_event_in_hand_and_those_queued_not_the_stop() -> None:
    counters = ListenerCounters()
    release = threading.Event()
    intake = Intake(APP, 10, counters, [("slow", lambda _parsed: release.wait(30))])
    try:
        for n in range(3):
            intake.offer(EventKind.STARTED, started(f"q-{n}"))
        wait_for(lambda: intake.queue_state()[0] == 2, 30, "the first event in hand")
        intake.stop(0.1)  # the stop is queued behind the two, and the handler holds the first
        assert intake.worker.is_alive() and intake.held() == 3
    finally:
        release.set()
    wait_for(lambda: not intake.worker.is_alive(), 30, "the intake to end")
    assert intake.held() == 0


def test_the_history_writer_holds_its_whole_batch_while_the_write_waits_not_the_stop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.db"
    counters = ListenerCounters()
    # Batches of three, gathered for up to 5 s: the three offered at once are one batch.
    sink = HistorySink(HistoryWriter(f"sqlite:///{path}"), counters, capacity=10, batch_size=3,
                       flush_seconds=5.0)
    for n in range(3):
        sink(parse(started(f"q-first-{n}")))
    assert sink.flush(60)  # written: the schema is there too
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        for n in range(3):
            sink(parse(started(f"q-{n}")))
        wait_for(lambda: sink.queue_state()[0] == 0, 30, "the writer to take the batch")
        assert sink.held() == 3
        sink.stop(0.4)  # far shorter than the writer's wait for the lock
        assert sink.worker.is_alive() and sink.held() == 3
    finally:
        holder.rollback()
        holder.close()
    wait_for(lambda: not sink.worker.is_alive(), 70, "the history writer to end")
    assert sink.held() == 0 and counters.dropped == {}


def parse(raw_json: str) -> ParsedEvent:
    return listener_event(EventKind.STARTED, raw_json, APP, 0.0)
