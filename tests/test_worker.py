"""The worker primitive with real threads: a waiting worker beats, one blocked inside a call does
not and is reported hung within its deadline, one that crashed is dead; the backoff doubles with
jitter up to its ceiling; the queue's evicting offer keeps the bound and the drain count right."""

from __future__ import annotations

import threading

from sparkwatch.listener.push_sink import retry_after_seconds
from sparkwatch.worker import Backoff, BoundedQueue, Worker
from tests.support import wait_for

DEADLINE = 0.4


def test_an_idle_worker_keeps_beating_and_is_never_hung() -> None:
    q: BoundedQueue[int | None] = BoundedQueue(4)
    taken: list[int] = []

    def run() -> None:
        while (item := worker.take(q)) is not None:
            taken.append(item)

    worker = Worker("idle", run, "test-idle", deadline=DEADLINE)
    worker.start()
    first = worker.last_progress
    wait_for(lambda: worker.last_progress > first + 2 * DEADLINE, 10, "beats while waiting")
    assert worker.health().state == "ok"
    assert worker.health().seconds_since_progress < DEADLINE
    assert q.offer(7) and q.offer(None)
    worker.join(5)
    assert taken == [7] and worker.health().state == "stopped"


def test_a_worker_blocked_inside_a_call_is_hung_after_its_deadline_and_recovers() -> None:
    release, stop = threading.Event(), threading.Event()

    def run() -> None:
        release.wait()  # a call that does not return (no beat inside)
        worker.beat()
        worker.wait(60, stop)

    worker = Worker("blocked", run, "test-blocked", deadline=DEADLINE)
    worker.start()
    frozen = worker.last_progress
    wait_for(lambda: worker.health().state == "hung", DEADLINE + 5, "hung")
    health = worker.health()
    assert health.seconds_since_progress > DEADLINE and not health.ok
    assert worker.last_progress == frozen
    release.set()
    wait_for(lambda: worker.health().state == "ok", 5, "beating again")
    assert worker.last_progress > frozen
    stop.set()
    worker.join(5)


def test_a_worker_whose_thread_crashed_is_dead() -> None:
    def run() -> None:
        raise RuntimeError("boom")

    worker = Worker("crashing", run, "test-crashing", deadline=DEADLINE)
    worker.start()
    worker.join(5)
    assert worker.health().state == "dead" and not worker.health().ok


def test_backoff_doubles_with_jitter_up_to_its_ceiling_and_resets() -> None:
    backoff = Backoff(0.1, 1.0)
    nominal = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    for n, delay in enumerate(nominal, start=1):
        wait = backoff.failed()
        assert delay * 0.5 <= wait <= min(delay * 1.5, 1.0), (n, wait)
        assert backoff.failures == n
    assert not backoff.loud, "the 6th failure of an outage is not logged, the 1st and 20th are"
    assert backoff.succeeded() == len(nominal) and backoff.failures == 0
    assert backoff.failed() <= 0.15 and backoff.loud


def test_an_evicting_offer_drops_the_oldest_and_keeps_the_drain_count() -> None:
    q: BoundedQueue[int] = BoundedQueue(3)
    assert [q.offer_evicting(i) for i in range(5)] == [0, 0, 0, 1, 1]
    assert q.size() == 3 and not q.wait_drained(0.01)
    assert [q.get_nowait() for _ in range(3)] == [2, 3, 4]
    q.done(3)
    assert q.wait_drained(0.01), "evicted items count as done"


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    assert retry_after_seconds("120") == 120.0
    assert retry_after_seconds(" 0 ") == 0.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: now
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None
