"""Building findings: the identity and batch range every finding carries, worded once."""

from __future__ import annotations

from typing import Any

from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.plan.describe import summary
from sparkwatch.plan.model import OperatorIdentity


def finding(
    record: QueryRecord,
    code: str,
    severity: Severity,
    title: str,
    evidence: list[str],
    fix: str,
    op: OperatorIdentity | None = None,
    batches: tuple[int, int] | None = None,
    **numbers: Any,
) -> Finding:
    if op is not None:
        # Say what the operator is first: "operator 0 (aggregation on [key], update, ...)".
        evidence = [f"operator {op.index} {op.operator}: {summary(op)}", *evidence]
    return Finding(
        code=code,
        severity=severity,
        query_id=record.query_id,
        query_name=record.name,
        run_id=record.run_id,
        title=title,
        evidence=tuple(evidence),
        fix=fix,
        operator_index=None if op is None else op.index,
        operator=None if op is None else op.operator,
        batches=batches,
        numbers=numbers,
    )


def event_time_column(op: OperatorIdentity) -> str:
    """The watermarked column, or a placeholder the user fills in."""
    return op.watermark_column or "<event-time column>"


def keys_code(keys: tuple[str, ...]) -> str:
    return ", ".join(f'"{k}"' for k in keys) or '"<key>"'
