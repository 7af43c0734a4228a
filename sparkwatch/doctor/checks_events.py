"""Lost progress events: batch ids missing from a run's progress.

Spark numbers a run's batches consecutively and reports every one. A batch without a progress
event in the history means the event was lost on its way: Spark's listener bus dropped it from
its full ``streams`` queue (for every streaming listener), or one of sparkwatch's own bounded
queues did. Either way every per-batch figure of the run misses those batches.
"""

from __future__ import annotations

from sparkwatch.doctor.evidence import batch_range, count
from sparkwatch.doctor.findings import finding
from sparkwatch.doctor.model import Finding, QueryRecord, Severity

FIX = (
    "Spark's listener bus drops events for every listener when its streams queue is full "
    "(driver log: 'Dropping event from queue streams'; series "
    "spark_streaming_listener_bus_events_dropped_total{queue=\"streams\"}): raise "
    "spark.scheduler.listenerbus.eventqueue.streams.capacity and find the slow "
    "StreamingQueryListener. sparkwatch's own queues count their drops in "
    "spark_streaming_listener_events_dropped_total: raise SPARKWATCH_QUEUE_CAPACITY or "
    "SPARKWATCH_HISTORY_QUEUE_CAPACITY (SPARKWATCH_PUSH_QUEUE_CAPACITY when pushing)."
)


def check_lost_events(record: QueryRecord) -> list[Finding]:
    ids = sorted({b.batch_id for b in record.batches})
    gaps = [(a, b) for a, b in zip(ids, ids[1:], strict=False) if b - a > 1]
    if not gaps:
        return []
    missing = sum(b - a - 1 for a, b in gaps)
    span = (ids[0], ids[-1])
    first = gaps[0]
    where = f"batch {first[0] + 1}" if first[1] - first[0] == 2 else (
        f"batches {first[0] + 1}–{first[1] - 1}")
    return [finding(
        record, "progress-events-lost", Severity.WARNING, "Progress events were lost",
        [f"{count(missing)} of the {count(span[1] - span[0] + 1)} batches over "
         f"{batch_range(*span)} have no progress event, in {len(gaps)} gap(s), the first "
         f"{where}"],
        FIX, batches=span, missing_batches=missing, gaps=len(gaps),
    )]
