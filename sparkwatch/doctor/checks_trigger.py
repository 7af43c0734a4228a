"""Real-time batches against their own interval (known when the listener read the trigger with
the plan, classic mode; see :mod:`sparkwatch.plan.trigger`).

In real-time mode (Spark 4.1+) each batch runs for its whole interval by design, reading rows as
they arrive: a batch as long as the interval is the healthy case, and only a batch well beyond it
(its commit and the next start fall behind) is a finding. Batches of other triggers are not
judged here: a processing-time interval overrun on a loaded machine is common and the
batch-duration alert watches it with thresholds the user sets.
"""

from __future__ import annotations

from sparkwatch.doctor.evidence import batch_range, median, seconds
from sparkwatch.doctor.findings import finding
from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.plan.trigger import REAL_TIME

MIN_BATCHES = 3
REAL_TIME_MAX_RATIO = 1.5
"""As the batch-duration alert's ``real_time_max_ratio`` (dashboards/config.yaml)."""


def check_real_time_overrun(record: QueryRecord) -> list[Finding]:
    plan = record.plan
    if plan is None or plan.trigger != REAL_TIME:
        return []
    interval = plan.trigger_interval_ms
    steady = record.batches[1:]  # the first batch plans the query and warms caches
    if not interval or len(steady) < MIN_BATCHES:
        return []
    typical = median([b.duration_ms for b in steady])
    if typical <= interval * REAL_TIME_MAX_RATIO:
        return []
    span = (steady[0].batch_id, steady[-1].batch_id)
    evidence = [f"median batch {seconds(typical / 1000)} over {batch_range(*span)} against a "
                f"{plan.trigger} trigger of {seconds(interval / 1000)}"]
    evidence.append(
        "in real-time mode each batch lasts its interval by design: one lasting more than "
        f"{REAL_TIME_MAX_RATIO}x it spends the excess committing or waiting for its tasks")
    fix = ("Give the real-time stages the cores they need (every stage of a real-time batch "
           "runs at once: at least as many task slots as partitions of all its stages), or "
           "lengthen trigger(realTime=...).")
    return [finding(record, "real-time-batches-overrun", Severity.WARNING,
                    "real-time batches last well beyond their interval", evidence, fix,
                    batches=span, median_batch_ms=typical, trigger_interval_ms=interval)]
