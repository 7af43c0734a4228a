"""Doctor's report as text for people and JSON for pipelines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sparkwatch.doctor.checks_contents import Inspected
from sparkwatch.doctor.evidence import batch_range
from sparkwatch.doctor.model import Finding, QueryRecord, Severity
from sparkwatch.jsoncodec import dumps_strict
from sparkwatch.terminal import clip, printable

NAME_WIDTH = 100
"""Columns a name takes in the text report at most: the listener writes names of up to 256
characters, but a hand-edited or old history, or a peer collector, may hold any length, and a
100 KB name made a 100 KB line. The JSON report keeps names whole, for pipelines to match."""


def plan_status(record: QueryRecord) -> str:
    if record.plan is None:
        return "none"
    return record.plan.source.value


def _checked(record: QueryRecord) -> dict[str, Any]:
    return {
        "query_id": record.query_id,
        "name": record.name,
        "run_id": record.run_id,
        "batches": len(record.batches),
        "first_batch": record.batches[0].batch_id if record.batches else None,
        "last_batch": record.batches[-1].batch_id if record.batches else None,
        "operators": len(record.operators),
        "plan": plan_status(record),
        "trigger": record.plan.trigger if record.plan is not None else None,
        "trigger_interval_ms": record.plan.trigger_interval_ms if record.plan else None,
    }


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": f.severity.label,
        "query_id": f.query_id,
        "query_name": f.query_name,
        "run_id": f.run_id,
        "operator_index": f.operator_index,
        "operator": f.operator,
        "batches": list(f.batches) if f.batches else None,
        "title": f.title,
        "evidence": list(f.evidence),
        "fix": f.fix,
        "numbers": dict(f.numbers),
    }


def counts(findings: Sequence[Finding]) -> dict[str, int]:
    return {s.label: sum(1 for f in findings if f.severity is s) for s in reversed(Severity)}


def _checked_state(i: Inspected) -> dict[str, Any]:
    return {
        "checkpoint": i.report.checkpoint,
        "name": i.name,
        "batch_id": i.report.batch_id,
        "stores": sum(len(op.stores) for op in i.report.operators),
        "error": i.error,
    }


def to_json(
    records: Sequence[QueryRecord], findings: Sequence[Finding], fail_on: str, failed: bool,
    inspected: Sequence[Inspected] = (),
) -> str:
    report = {
        "checked": [_checked(r) for r in records],
        "checked_state": [_checked_state(i) for i in inspected],
        "findings": [finding_dict(f) for f in findings],
        "summary": {**counts(findings), "fail_on": fail_on, "failed": failed},
    }
    # Strict JSON: a number made of a broken history's NaN or infinity is null, as the API
    # writes one.
    return dumps_strict(report)


def to_text(records: Sequence[QueryRecord], findings: Sequence[Finding],
            inspected: Sequence[Inspected] = ()) -> str:
    tally = ", ".join(
        f"{n} {label}{'s' if n > 1 and label != 'info' else ''}"
        for label, n in counts(findings).items()
        if n
    )
    parts = [f"{len(records)} quer{'y' if len(records) == 1 else 'ies'}"] if records or not (
        inspected) else []
    if inspected:
        parts.append(f"the state of {len(inspected)} checkpoint{'s' if len(inspected) > 1 else ''}")
    what = " and ".join(parts)
    lines = [f"checked {what}: " + (tally or "no findings")]
    for record in records:
        lines.append("  " + _query_line(record, findings))
    for i in inspected:
        lines.append("  " + _state_line(i, findings))
    for f in findings:
        lines.append("")
        lines.extend(_finding_lines(f))
    # Each item is one line; names and errors in it come from apps and must not forge others.
    return "\n".join(map(printable, lines))


_PLAN_TEXT = {"plan": "plan read", "progress": "plan not read", "none": "no plan recorded"}


def _query_line(record: QueryRecord, findings: Sequence[Finding]) -> str:
    own = sum(1 for f in findings if f.query_id == record.query_id)
    first, last = record.batches[0].batch_id, record.batches[-1].batch_id
    verdict = f"{own} finding{'s' if own != 1 else ''}" if own else "ok"
    return (
        f"{clip(record.title, NAME_WIDTH)} ({record.query_id[:8]}): {verdict} - run "
        f"{record.run_id[:8]}, {batch_range(first, last)}, {_PLAN_TEXT[plan_status(record)]}"
        f"{_trigger_text(record)}"
    )


def _trigger_text(record: QueryRecord) -> str:
    plan = record.plan
    if plan is None or plan.trigger is None:
        return ""
    interval = plan.trigger_interval_ms
    return f", trigger {plan.trigger}" + ("" if interval is None else f" {interval / 1000:g}s")


def _state_line(i: Inspected, findings: Sequence[Finding]) -> str:
    name = clip(i.name, NAME_WIDTH)
    if i.error is not None:
        return f"{name} (state of {i.report.checkpoint}): unreadable - {i.error}"
    own = sum(1 for f in findings if f.query_id == i.report.checkpoint)
    verdict = f"{own} finding{'s' if own != 1 else ''}" if own else "ok"
    stores = sum(len(op.stores) for op in i.report.operators)
    return (f"{name} (state of {i.report.checkpoint}): {verdict} - {stores} "
            f"store{'s' if stores != 1 else ''} as of batch {i.report.batch_id}")


def _finding_lines(f: Finding) -> list[str]:
    where = [clip(f.query_name or f.query_id, NAME_WIDTH)]
    operator = clip(f.operator or "", NAME_WIDTH)
    if f.operator_index is not None:
        where.append(f"operator {f.operator_index} {operator}")
    if f.batches is not None:
        where.append(batch_range(*f.batches))
    head = f"{f.severity.label.upper():<8}{f.code}: {f.title} [{', '.join(where)}]"
    evidence = list(f.evidence)
    if f.operator and operator != f.operator:
        # The checks' evidence names the operator too ("operator 0 <name>: aggregation on ...").
        evidence = [line.replace(f.operator, operator) for line in evidence]
    return [head, *(f"        - {line}" for line in evidence), f"        fix: {f.fix}"]
