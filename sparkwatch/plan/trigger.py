"""A run's trigger: its kind and interval, from the JVM query's ``trigger`` (classic mode).

Spark's events carry no trigger (neither the started event nor the progress JSON, 3.5 to 4.3):
the listener reads it from the running query with the plan (:mod:`sparkwatch.plan.jvm`), as
Spark prints it: ``ProcessingTimeTrigger(1000)``, ``AvailableNowTrigger``, ``OneTimeTrigger``,
``ContinuousTrigger(1000)``, ``RealTimeTrigger(5000)`` (4.1+, ``trigger(realTime=...)``). In
Spark Connect the trigger is not reachable: unknown.

In real-time mode a batch is long-running by design: it lasts its whole interval (the "batch
duration" of ``realTime``), reading rows as they come, so a batch duration near the interval is
normal there and alerts and checks compare against the interval instead of a fixed limit.
"""

from __future__ import annotations

import re

PROCESSING_TIME = "processing_time"
AVAILABLE_NOW = "available_now"
ONCE = "once"
CONTINUOUS = "continuous"
REAL_TIME = "real_time"

KINDS: tuple[str, ...] = (PROCESSING_TIME, AVAILABLE_NOW, ONCE, CONTINUOUS, REAL_TIME)

_BY_CLASS = {
    "ProcessingTimeTrigger": PROCESSING_TIME,
    "ProcessingTime": PROCESSING_TIME,
    "AvailableNowTrigger": AVAILABLE_NOW,
    "OneTimeTrigger": ONCE,
    "ContinuousTrigger": CONTINUOUS,
    "RealTimeTrigger": REAL_TIME,
}
_FORM = re.compile(r"(?:.*[.$])?(\w+?)\$?(?:\((\d+)(?:\s*ms)?\))?")


def parse_trigger(text: str | None) -> tuple[str | None, int | None]:
    """(kind, interval in ms) of Spark's printed trigger; (None, None) when not recognised."""
    if not text:
        return None, None
    match = _FORM.fullmatch(text.strip())
    if match is None:
        return None, None
    kind = _BY_CLASS.get(match.group(1))
    if kind is None:
        return None, None
    interval = int(match.group(2)) if match.group(2) is not None else None
    return kind, interval


def interval_text(ms: int | None) -> str:
    """Seconds as a label value (``5``, ``0.5``); empty when the trigger has none."""
    return "" if ms is None else f"{ms / 1000:g}"
