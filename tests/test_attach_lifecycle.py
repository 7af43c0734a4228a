"""An attachment's life on a real session: one per session however often the app attaches, ended
queries leave the driver's memory with /metrics off, detach() returns within its deadline
while /metrics is being served, and a history URL that can never work is refused at attach."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.request
from typing import Any

import pytest

import sparkwatch
from bench.local import free_port
from sparkwatch.listener.attach import Attachment
from sparkwatch.model.events import EventKind
from sparkwatch.settings import SettingsError
from tests.conftest import CANARY_PASSWORD, FIXTURES
from tests.support import wait_for

pytestmark = pytest.mark.spark


def recorded(kind: str, query_id: str) -> str:
    """Spark 4.3's JSON of a ``kind`` event ("started", "terminated") as recorded, for
    ``query_id``."""
    doc = json.loads((FIXTURES / "spark-4.3.0" / "dedupe_hdfs.json").read_text())[kind]
    return json.dumps({**doc, "id": query_id})


def listeners(spark: Any) -> int:
    return len(spark._jsparkSession.streams().listListeners())


def offer(att: Attachment, kind: EventKind, query_id: str) -> None:
    """Hand ``att`` an event as Spark's callback thread does."""
    assert att.intake is not None
    att.intake.offer(kind, recorded(kind.value, query_id))


def test_a_second_attach_returns_the_live_attachment_and_after_detach_attaches_anew(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    before = listeners(spark)
    first = sparkwatch.attach(spark, metrics_port=0, history_url="off")
    try:
        with caplog.at_level(logging.INFO, logger="sparkwatch"):
            again = sparkwatch.attach(spark, metrics_port=0, history_url="off")
        assert again is first
        assert listeners(spark) == before + 1
        [said] = [r.getMessage() for r in caplog.records if "already attached" in r.getMessage()]
        assert "by sparkwatch.attach() at " in said and "test_attach_lifecycle.py:" in said
    finally:
        first.detach(5)
    assert listeners(spark) == before
    anew = sparkwatch.attach(spark, metrics_port=0, history_url="off")
    try:
        assert anew is not first and anew.live and listeners(spark) == before + 1
    finally:
        anew.detach(5)


def test_an_app_under_sparkwatch_run_that_attaches_too_gets_the_runs_attachment(
    spark: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sparkwatch.listener import autoattach

    # The run's settings: no default port 9750 (the demo tests' one), no sparkwatch.db here.
    monkeypatch.setenv("SPARKWATCH_METRICS_PORT", "0")
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", "off")
    by_run = autoattach._attach(spark)  # what the wrapped getOrCreate() does under the run
    try:
        with caplog.at_level(logging.INFO, logger="sparkwatch"):
            assert sparkwatch.attach(spark, metrics_port=0) is by_run
        [said] = [r.getMessage() for r in caplog.records if "already attached" in r.getMessage()]
        assert "(by sparkwatch run, settings from SPARKWATCH_* and spark.sparkwatch.*)" in said
    finally:
        by_run.detach(5)


def test_ended_queries_leave_the_drivers_memory_with_metrics_off(spark: Any) -> None:
    # Push-only (no /metrics, so no scrape ever evicts): twelve short runs, as the review had.
    att = sparkwatch.attach(spark, metrics_enabled=False, history_url="off",
                            terminated_grace_seconds=1)
    try:
        for i in range(12):
            offer(att, EventKind.STARTED, f"churn-{i}")
            offer(att, EventKind.TERMINATED, f"churn-{i}")
        assert att.flush(10)
        wait_for(lambda: att.state.query(att.app.id, "churn-11") is None, 10,
                 "the ended queries forgotten a grace after they ended")
        with att.state.read() as (_, queries):
            assert queries == []
    finally:
        att.detach(5)


def test_detach_returns_within_its_deadline_though_metrics_were_just_scraped(
    spark: Any,
) -> None:
    # A collector that takes connections and never answers: the push sink uses the whole
    # deadline, and the /metrics server is stopped with none left.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)
    att = sparkwatch.attach(spark, metrics_port=0, history_url="off",
                            push_url=f"http://127.0.0.1:{silent.getsockname()[1]}/api/v1/events",
                            push_timeout_seconds=30, push_flush_seconds=0.05)
    push = att.push
    assert push is not None
    try:
        offer(att, EventKind.STARTED, "deadline")
        assert att.flush(0.5) is False  # nothing can be delivered
        with urllib.request.urlopen(f"http://127.0.0.1:{att.metrics_port}/metrics",
                                    timeout=5) as response:
            assert response.status == 200
    finally:
        start = time.monotonic()
        att.detach(timeout=0.6)
        detached_in = time.monotonic() - start
        silent.close()  # the POST left waiting ends; its thread must not outlive this test
        wait_for(lambda: not push.worker.is_alive(), 10, "the push thread ended")
    # A server polling every 0.5 s from the scrape on would have needed ~0.4 s more.
    assert detached_in < 0.6 + 0.2, detached_in


def test_an_app_name_past_the_name_limit_is_cut_on_the_listeners_own_series(spark: Any) -> None:
    """Events cut the app name to 256 characters, the listener's own series took it whole: a
    100,000-character name made every scrape megabytes."""
    from prometheus_client.parser import text_string_to_metric_families

    from sparkwatch.model.contract import LIMITS

    att = sparkwatch.attach(spark, metrics_port=0, history_url="off", app_name="A" * 100_000)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{att.metrics_port}/metrics",
                                    timeout=5) as response:
            text = response.read().decode()
    finally:
        att.detach(5)
    names = {sample.labels["app_name"] for family in text_string_to_metric_families(text)
             for sample in family.samples if "app_name" in sample.labels}
    assert names and all(len(name) <= LIMITS.name_chars for name in names), sorted(map(len, names))
    assert len(att.app.name) <= LIMITS.name_chars and att.app.name.startswith("AAAA")


HISTORY_URL_KEY = "spark.sparkwatch.history.url"
NEVER_WORKS = [
    pytest.param("nonsense", "not a database URL: <unparseable URL>", id="not-a-url"),
    pytest.param("sqlite:/relative", "not a database URL: <unparseable URL>", id="one-slash"),
    pytest.param("mysql://u@db.example/x",
                 "unsupported database 'mysql' in mysql://u@db.example/x", id="mysql"),
    pytest.param("postgresql+nodriver://x/y", "cannot load the database driver for "
                 "postgresql+nodriver://x/y: Can't load plugin: sqlalchemy.dialects:"
                 "postgresql.nodriver", id="unknown-driver"),
    pytest.param(f"postgresql+psycopg2cffi://u:{CANARY_PASSWORD}@db.example/x",
                 "cannot load the database driver for postgresql+psycopg2cffi://u:***@db.example"
                 "/x: No module named 'psycopg2cffi'", id="driver-not-installed"),
    pytest.param(f"postgresql+psycopg://u:{CANARY_PASSWORD}@db.example:99999/x",
                 "port 99999 is out of range 0-65535", id="port-out-of-range"),
    pytest.param(f"postgresql://u:my@{CANARY_PASSWORD}@db.example/x",
                 "database URL refused: an '@' follows its credentials", id="at-in-password"),
    pytest.param("sqlite://", "sqlite:// is an in-memory database, gone when the driver exits",
                 id="in-memory"),
    pytest.param("sqlite:///:memory:", "sqlite:///:memory: is an in-memory database",
                 id="memory-file-name"),
    pytest.param("sqlite:///h.db?timeout=abc",
                 "database URL refused: sqlite:///h.db?…: could not convert", id="bad-option"),
    pytest.param(f"postgresql+psycopg_async://u:{CANARY_PASSWORD}@db.example/x",
                 "postgresql+psycopg_async://u:***@db.example/x: postgresql+psycopg_async is an "
                 "asyncio driver; the history writes synchronously (use e.g. postgresql+psycopg)",
                 id="asyncio-driver"),
    pytest.param("sqlite:////no/such/folder/h.db",
                 "no folder /no/such/folder for the SQLite file /no/such/folder/h.db (SQLite "
                 "creates the file, not its folder)", id="sqlite-folder-missing"),
]


@pytest.mark.parametrize(("url", "problem"), NEVER_WORKS)
def test_a_history_url_that_can_never_work_is_refused_at_attach_naming_the_variable(
    spark: Any, monkeypatch: pytest.MonkeyPatch, url: str, problem: str
) -> None:
    """It was taken, and found wrong only on the history writer's thread, in a log line, once
    the app ran: refused as a bad SPARKWATCH_* value is, naming it, never showing a password."""
    before = listeners(spark)
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", url)
    with pytest.raises(SettingsError) as refused:
        sparkwatch.attach(spark, metrics_port=0)
    message = str(refused.value)
    assert message.startswith(f"SPARKWATCH_HISTORY_URL: {problem}"), message
    assert CANARY_PASSWORD not in message
    assert listeners(spark) == before


@pytest.mark.parametrize("given", ["conf", "override"])
def test_a_history_url_refused_at_attach_names_the_conf_key_or_argument_it_came_from(
    spark: Any, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    before = listeners(spark)
    monkeypatch.delenv("SPARKWATCH_HISTORY_URL", raising=False)
    url = "postgresql+nodriver://u@db.example/x"
    overrides: dict[str, Any] = {"metrics_port": 0}
    if given == "conf":
        spark.conf.set(HISTORY_URL_KEY, url)
    else:
        overrides["history_url"] = url
    try:
        with pytest.raises(SettingsError) as refused:
            sparkwatch.attach(spark, **overrides)
    finally:
        spark.conf.unset(HISTORY_URL_KEY)
    named = HISTORY_URL_KEY if given == "conf" else "history_url"
    assert str(refused.value).startswith(f"{named}: cannot load the database driver for "
                                         "postgresql+nodriver://u@db.example/x")
    assert listeners(spark) == before


def test_a_history_whose_server_is_down_is_attached_for_the_writer_to_ride_out(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A well-formed URL is not connected to at attach: a database down is an outage."""
    down = f"postgresql+psycopg://u:{CANARY_PASSWORD}@127.0.0.1:{free_port()}/x"
    with caplog.at_level(logging.ERROR, logger="sparkwatch"):
        att = sparkwatch.attach(spark, metrics_port=0, history_url=down,
                                history_flush_seconds=0.05)
        try:
            assert att.live and att.history is not None
            offer(att, EventKind.STARTED, "history-down")
            assert att.flush(0.5) is False  # nothing can be written while it is down
        finally:
            att.detach(2)
    assert not [r for r in caplog.records if "history disabled" in r.getMessage()]
