"""The listener's history sink and writer against a history database REPLACED while they run (a
PostgreSQL database dropped and recreated empty, a SQLite file's directory moved away and made
again): once the database is back, the batch held for retry and every event queued behind it
are written there, the schema recreated where the writer may migrate and, where it may not, the
missing schema logged with what to run. A failure whose message changes is logged, not hidden
behind the throttle of identical ones. Real SQLite and PostgreSQL, no mocks."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.revision import current_of
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.listener.history_sink import HistorySink
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import ParsedEvent
from tests.support import wait_for
from tests.test_history_sink import events

FAILED = "history write failed"
# Fast enough for a test, slow enough that an outage stays short of the 20th attempt (the
# throttle's next loud one) while a test looks at what was logged.
BACKOFF = (0.2, 0.4)


def written(url: str) -> set[tuple[str, int]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {(r, int(b)) for r, b in conn.execute(
                sa.text("select run_id, batch_id from batches")).all()}
    finally:
        engine.dispose()


def revision(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return current_of(conn)
    finally:
        engine.dispose()


def keys(batch: list[ParsedEvent]) -> set[tuple[str, int]]:
    return {(e.event.run_id, e.event.batch_id) for e in batch}


def failures(counters: ListenerCounters) -> int:
    return counters.delivery_failures.get("history", 0)


def failed_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if FAILED in r.getMessage()]


class Admin:
    """Drops, recreates and blocks one PostgreSQL database by name, as an operator would."""

    def __init__(self, admin_url: str, url: str) -> None:
        self.name = sa.engine.make_url(url).database
        self._engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")

    def run(self, sql: str) -> None:
        with self._engine.connect() as conn:
            conn.execute(sa.text(sql))

    def drop(self) -> None:
        self.run(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def create(self) -> None:
        self.run(f'CREATE DATABASE "{self.name}"')

    def block(self) -> None:
        """Refuse new connections and end the open ones."""
        self.run(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self.run("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                 f"WHERE datname = '{self.name}' AND pid <> pg_backend_pid()")

    def close(self) -> None:
        self._engine.dispose()


@pytest.fixture
def admin(pg_admin_url: str, pg_url: str) -> Iterator[Admin]:
    """pg_url's database to replace; pg_url's fixture drops it (whichever is there) at the end."""
    a = Admin(pg_admin_url, pg_url)
    yield a
    a.close()


@pytest.fixture
def caplog_warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="sparkwatch.listener.history_sink")
    return caplog


def sink_for(writer: HistoryWriter, counters: ListenerCounters) -> HistorySink:
    return HistorySink(writer, counters, capacity=100, batch_size=2, flush_seconds=0.05,
                       backoff=BACKOFF)


BEFORE = 3
"""Events written before the database is replaced; the rest of :func:`events` come after."""


@contextmanager
def sink_that_wrote_the_first_events(
    writer: HistoryWriter,
) -> Iterator[tuple[HistorySink, ListenerCounters, list[ParsedEvent]]]:
    """A sink that has written the first :data:`BEFORE` events; with its counters and the events
    still to send. Stopped at the end."""
    batch = events()
    counters = ListenerCounters()
    sink = sink_for(writer, counters)
    try:
        for e in batch[:BEFORE]:
            sink(e)
        assert sink.flush(60)
        yield sink, counters, batch[BEFORE:]
    finally:
        sink.stop(10)


def send_while_gone(sink: HistorySink, counters: ListenerCounters, after: list[ParsedEvent],
                    failing: str) -> None:
    """Send ``after`` with the database gone and wait until two writes failed: ``after`` is more
    than a batch, so some events are held for retry and the rest queued behind them."""
    for e in after:
        sink(e)
    wait_for(lambda: failures(counters) >= 2, 30, failing)


def test_a_postgresql_history_dropped_and_recreated_empty_gets_its_schema_and_the_held_events(
    pg_url: str, admin: Admin, caplog_warnings: pytest.LogCaptureFixture,
) -> None:
    """Dropped while the listener writes, recreated empty later: the writer (migrate on)
    creates the schema again and writes every event held or queued since, none dropped."""
    with sink_that_wrote_the_first_events(HistoryWriter(pg_url)) as (sink, counters, after):
        assert written(pg_url) == keys(events()[:BEFORE])

        admin.drop()
        send_while_gone(sink, counters, after, "writes failing on the dropped database")
        admin.create()

        assert sink.flush(30), ("held events never written", failed_messages(caplog_warnings))
        assert written(pg_url) == keys(after)
        assert revision(pg_url) == migrate.head()
        assert counters.dropped == {}
        assert any("history writes resumed" in r.getMessage() for r in caplog_warnings.records)


def test_a_history_recreated_empty_that_the_writer_may_not_migrate_is_logged_as_schemaless(
    pg_url: str, admin: Admin, caplog_warnings: pytest.LogCaptureFixture,
) -> None:
    """With migrate off the writer may not create the schema of a database recreated empty:
    it says so, naming `sparkwatch db upgrade`, instead of retrying in silence, and writes the
    held events once someone has run it."""
    migrate.upgrade(pg_url)
    with sink_that_wrote_the_first_events(HistoryWriter(pg_url, migrate=False)) as (
            sink, counters, after):
        admin.drop()
        send_while_gone(sink, counters, after, "writes failing on the dropped database")
        admin.create()

        def said_no_schema() -> bool:
            return any("has no sparkwatch history schema" in m and "sparkwatch db upgrade" in m
                       for m in failed_messages(caplog_warnings))

        wait_for(said_no_schema, 30, "the missing schema logged with what to run")
        assert revision(pg_url) is None, "a writer without migrate created the schema"

        migrate.upgrade(pg_url)  # what the log says to run
        assert sink.flush(60)
        assert written(pg_url) == keys(after)
        assert counters.dropped == {}


def test_a_sqlite_history_moved_away_is_written_again_in_a_new_file_at_its_path(
    tmp_path: Path, caplog_warnings: pytest.LogCaptureFixture,
) -> None:
    """The history's directory moved away and made again, empty: the pooled connection still
    holds the moved file, so the writer must open the path again, where it creates the new
    file's schema and writes every event held or queued since; the moved file keeps only what
    it had."""
    home, moved = tmp_path / "history", tmp_path / "moved"
    home.mkdir()
    url = f"sqlite:///{home / 'history.db'}"
    with sink_that_wrote_the_first_events(HistoryWriter(url)) as (sink, counters, after):
        shutil.move(home, moved)
        send_while_gone(sink, counters, after, "writes failing with the file moved away")
        home.mkdir()

        assert sink.flush(30), ("held events never written", failed_messages(caplog_warnings))
        assert written(url) == keys(after)
        assert revision(url) == migrate.head()
        assert written(f"sqlite:///{moved / 'history.db'}") == keys(events()[:BEFORE])
        assert counters.dropped == {}


def test_a_failure_whose_message_changes_is_logged_and_a_repeated_one_is_not(
    pg_url: str, admin: Admin, caplog_warnings: pytest.LogCaptureFixture,
) -> None:
    """One outage, two causes: the database first refuses connections, then is dropped. Each
    new message is logged when it first fails an attempt, not at the throttle's 20th attempt;
    the attempts repeating a message are not logged (short of the 20th)."""
    migrate.upgrade(pg_url)
    batch = events()
    counters = ListenerCounters()
    sink = sink_for(HistoryWriter(pg_url), counters)
    try:
        sink(batch[0])
        assert sink.flush(60)

        admin.block()
        for e in batch[1:]:
            sink(e)

        def logged(text: str) -> bool:
            return any(text in m for m in failed_messages(caplog_warnings))

        # The first attempt may fail on the connection the block ended; the next ones connect.
        wait_for(lambda: failures(counters) >= 3, 30, "attempts refused by the blocked database")
        assert logged("is not currently accepting connections"), failed_messages(caplog_warnings)
        seen = failures(counters)
        admin.drop()
        wait_for(lambda: failures(counters) >= seen + 3, 30, "attempts on the dropped database")
        assert logged("does not exist"), failed_messages(caplog_warnings)
        attempts = failures(counters)
        messages = failed_messages(caplog_warnings)

        admin.create()
        migrate.upgrade(pg_url)
        assert sink.flush(60)
        assert written(pg_url) == keys(batch[1:])
        assert counters.dropped == {}
    finally:
        sink.stop(10)
    assert attempts < 20, "the outage reached the throttle's 20th attempt: the test is too slow"
    # Logged: each change of message, once (the first attempt's may be the ended connection's).
    assert len(messages) <= 3 < attempts, messages
    causes = [m.partition("): ")[2] for m in messages]
    assert all(a != b for a, b in zip(causes, causes[1:], strict=False)), messages
