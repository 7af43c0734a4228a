"""The intake never blocks Spark's callback thread: when full it drops and counts; it forgets
ended queries on its own, scraped or not."""

from __future__ import annotations

import json
import threading

from sparkwatch.listener.intake import Intake
from sparkwatch.metrics.state import MetricState
from sparkwatch.metrics.stats import ListenerCounters
from sparkwatch.model.events import AppInfo, EventKind, ParsedEvent
from tests.conftest import FIXTURES
from tests.support import wait_for

APP = AppInfo("app", "app-1", "4.3.0")


def progress_json() -> str:
    path = next(FIXTURES.glob("history/*.json"))
    data = json.loads(path.read_text())
    return json.dumps(data[0] if isinstance(data, list) else data)


def test_a_full_queue_drops_new_events_and_counts_them_without_blocking() -> None:
    release = threading.Event()
    seen: list[ParsedEvent] = []

    def stuck_handler(event: ParsedEvent) -> None:
        release.wait(10)
        seen.append(event)

    counters = ListenerCounters()
    intake = Intake(APP, capacity=3, counters=counters, handlers=[("slow", stuck_handler)])
    raw = progress_json()
    for _ in range(10):
        intake.offer(EventKind.PROGRESS, raw)  # returns at once even though nothing drains
    assert counters.received == {"progress": 10}
    # one event is in the stuck handler, three queued, the rest dropped
    wait_for(lambda: counters.dropped.get("intake", 0) in (6, 7), 5, "drops counted")
    release.set()
    assert intake.flush(10)
    assert len(seen) + counters.dropped["intake"] == 10
    intake.stop(5)


def test_a_failing_handler_is_counted_and_does_not_starve_the_others() -> None:
    counters = ListenerCounters()
    seen: list[ParsedEvent] = []

    def broken(event: ParsedEvent) -> None:
        raise RuntimeError("sink down")

    intake = Intake(APP, 10, counters, [("broken", broken), ("ok", seen.append)])
    intake.offer(EventKind.PROGRESS, progress_json())
    assert intake.flush(5)
    assert counters.delivery_failures == {"broken": 1}
    assert len(seen) == 1
    intake.stop(5)


def test_unparseable_json_is_counted_as_a_parse_error() -> None:
    counters = ListenerCounters()
    intake = Intake(APP, 10, counters, [])
    intake.offer(EventKind.PROGRESS, "{not json")
    intake.offer(EventKind.PROGRESS, json.dumps({"id": "q", "batchId": "seven"}))
    assert intake.flush(5)
    assert counters.parse_errors == 2
    intake.stop(5)


def recorded(kind: str, query_id: str) -> str:
    """Spark 4.3's JSON of a ``kind`` event ("started", "terminated") as recorded, for
    ``query_id``."""
    doc = json.loads((FIXTURES / "spark-4.3.0" / "dedupe_hdfs.json").read_text())[kind]
    return json.dumps({**doc, "id": query_id})


def query_ids(state: MetricState) -> set[str]:
    with state.read() as (_, queries):
        return {q.query_id for q in queries}


def test_ended_queries_are_forgotten_after_the_grace_without_any_scrape() -> None:
    # Push-only (metrics off) or never scraped: the intake's own round forgets them.
    now = [1_000.0]
    state = MetricState(terminated_grace_seconds=60, clock=lambda: now[0])
    intake = Intake(APP, 100, ListenerCounters(), [("metrics", state.apply)],
                    tidy=state.evict, tidy_seconds=0.05)
    try:
        intake.offer(EventKind.STARTED, recorded("started", "still-running"))
        for i in range(12):
            intake.offer(EventKind.STARTED, recorded("started", f"churn-{i}"))
            intake.offer(EventKind.TERMINATED, recorded("terminated", f"churn-{i}"))
        assert intake.flush(5)
        assert len(query_ids(state)) == 13, "within the grace an ended query is still shown"
        now[0] += 60
        wait_for(lambda: query_ids(state) == {"still-running"}, 5,
                 "the 12 ended queries forgotten, the running one kept")
    finally:
        intake.stop(5)
