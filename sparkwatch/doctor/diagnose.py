"""Run every check over every query; findings most severe first."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sparkwatch.doctor.checks_cost import check_state_time, check_store_count
from sparkwatch.doctor.checks_events import check_lost_events
from sparkwatch.doctor.checks_rocksdb import check_rocksdb
from sparkwatch.doctor.checks_state import check_unbounded_state
from sparkwatch.doctor.checks_trigger import check_real_time_overrun
from sparkwatch.doctor.checks_watermark import check_excessive_delay, check_late_rows
from sparkwatch.doctor.model import Finding, QueryRecord, Severity

Check = Callable[[QueryRecord], list[Finding]]

CHECKS: tuple[Check, ...] = (
    check_unbounded_state,
    check_late_rows,
    check_excessive_delay,
    check_state_time,
    check_store_count,
    check_rocksdb,
    check_lost_events,
    check_real_time_overrun,
)
STATELESS: frozenset[Check] = frozenset({check_real_time_overrun})
"""Checks that look at the batches alone: they run for stateless queries too."""


def diagnose(records: Iterable[QueryRecord], checks: Iterable[Check] = CHECKS) -> list[Finding]:
    checks = tuple(checks)
    found = [f for record in records for check in checks
             if record.operators or check in STATELESS for f in check(record)]
    return sorted(found, key=lambda f: (-f.severity, f.query_name or f.query_id,
                                        f.operator_index if f.operator_index is not None else -1))


def worst(findings: Iterable[Finding]) -> Severity | None:
    return max((f.severity for f in findings), default=None)
