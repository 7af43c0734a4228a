"""Stopping the demo's queries while they wait for their next trigger, not in a batch.

A stop that lands while Spark plans a micro-batch can end the query with an interrupt Spark 4.x
does not take for its own: ``StreamingSymmetricHashJoinExec``'s constructor broadcasts the Hadoop
configuration, and the ``InterruptedException`` of that broadcast reaches the query wrapped in an
``InvocationTargetException``, which Spark reports as a failed run. ``StreamingQuery.stop()``
first marks the query terminated, and the trigger loop reads that mark before it starts a batch:
a stop that reaches the JVM while the query waits for its trigger ends the run cleanly.

A query in a processing-time trigger starts its batches on multiples of the trigger interval since
the epoch (Spark's ``ProcessingTimeExecutor.nextBatchTime``); one that overran its interval starts
the next batch at once. So a gap is a query seen idle on consecutive samples, with time left
before the next multiple for the stop to get there.

Only queries whose planning an interrupt breaks wait for a gap; the others are stopped at once,
in a batch or not (Spark takes the interrupt of an aggregation's, a deduplication's or a pandas
UDF's batch for its stop). Waiting for every query's gap made Ctrl-C take 25 s in the demo's
first minute, when the nine queries' first batches overrun their trigger back to back; stopping
the others first also frees the cores the joins need to reach a gap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from sparkwatch.demo.waiting import wait_until
from sparkwatch.summary import one_line

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

# Idle this long on every sample: the wait for a trigger, not the instant between two batches of
# a query that overran its interval (which Spark runs back to back).
IDLE_SECONDS = 0.1
# Time left before the next trigger for stop() to cross Py4J to the JVM, on a loaded machine.
MARGIN_SECONDS = 0.3


def until_next_trigger(now: float, interval: float) -> float:
    """Seconds from ``now`` (epoch seconds) to the next multiple of ``interval``."""
    return interval - now % interval


class TriggerWait:
    """True once ``query`` waits for its next trigger with time to spare (or has ended)."""

    def __init__(self, query: StreamingQuery, interval: float,
                 clock: Callable[[], float] = time.time) -> None:
        self._query, self._interval, self._clock = query, interval, clock
        self._idle_since: float | None = None

    def __call__(self) -> bool:
        if not self._query.isActive:
            return True
        if self._query.status["isTriggerActive"]:
            self._idle_since = None
            return False
        now = self._clock()
        if self._idle_since is None:
            self._idle_since = now
        return (now - self._idle_since >= IDLE_SECONDS
                and until_next_trigger(now, self._interval) >= MARGIN_SECONDS)


def stop_between_batches(query: StreamingQuery, interval: float, timeout: float = 10.0) -> None:
    """Stop ``query`` while it waits for its trigger, when it does within ``timeout``; after it,
    stop it anyway (a query whose batches run back to back has no such wait)."""
    wait_until(TriggerWait(query, interval), timeout)
    query.stop()


def stop_all(queries: list[StreamingQuery], interval: float, timeout: float = 10.0,
             interruptible: frozenset[str] = frozenset()) -> list[str]:
    """Stop every query (in parallel: each waits for its own trigger, and as the first ones stop
    the others catch up with theirs), even when some fail to stop; returns the errors, one line
    per query. The queries named in ``interruptible`` are stopped at once, without a wait."""
    if not queries:
        return []

    def stop(query: StreamingQuery) -> str | None:
        try:
            if query.name in interruptible:
                query.stop()
            else:
                stop_between_batches(query, interval, timeout)
        except Exception as exc:  # noqa: BLE001 - report and keep stopping the others
            return f"{query.name}: {one_line(exc)}"
        return None

    with ThreadPoolExecutor(len(queries), thread_name_prefix="sparkwatch-demo-stop") as pool:
        return [error for error in pool.map(stop, queries) if error is not None]
