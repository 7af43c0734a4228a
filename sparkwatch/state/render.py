"""The state report as a table for people and as JSON (schema in docs/state.md, version 1)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sparkwatch.state.model import Changes, OperatorReport, StateReport, StoreReport
from sparkwatch.state.skew import skew
from sparkwatch.terminal import fmt_bytes, printable

SCHEMA_VERSION = 1


def to_dict(report: StateReport) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "checkpoint": report.checkpoint,
        "batch_id": report.batch_id,
        "watermark_ms": report.watermark_ms,
        "operators": [_operator(op) for op in report.operators],
        # Operators with state metadata but no committed batch, as "ID NAME".
        "uncommitted_operators": list(report.uncommitted),
    }


def to_json(report: StateReport) -> str:
    return json.dumps(to_dict(report), indent=2)


def _operator(op: OperatorReport) -> dict[str, Any]:
    return {
        "operator_id": op.operator_id,
        "operator_name": op.operator_name,
        "rows": op.rows,
        "bytes": op.bytes,
        "stores": [_store(s) for s in op.stores],
    }


def _store(s: StoreReport) -> dict[str, Any]:
    sk = skew(s.partitions)
    total = max(1, s.bytes)
    return {
        "store_name": s.target.store_name,
        "state_var": s.target.state_var,
        "key_schema": s.key_schema,
        "value_schema": s.value_schema,
        "rows": s.rows,
        "bytes": s.bytes,
        "partitions": [{"partition_id": p.partition_id, "rows": p.rows, "bytes": p.bytes}
                       for p in s.partitions],
        "skew": {
            "max_rows": sk.max_rows, "median_rows": sk.median_rows,
            "max_bytes": sk.max_bytes, "median_bytes": sk.median_bytes,
            "ratio": round(sk.ratio, 3),
            "worst_partitions": [p.partition_id for p in sk.worst],
        },
        "keys": s.keys,
        "top_keys_by": list(s.key_fields),
        "top_keys": [{"key": k.key, "rows": k.rows, "bytes": k.bytes,
                      "share_of_bytes": round(k.bytes / total, 4)} for k in s.top_keys],
        "time_field": s.time_field,
        "rows_behind_watermark": s.expired_rows,
        "changes": _changes(s.changes),
    }


def _changes(c: Changes | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"from_batch": c.from_batch, "to_batch": c.to_batch, "puts": c.puts,
            "removes": c.removes, "keys_put": list(c.keys_put),
            "keys_removed": list(c.keys_removed)}


def to_text(report: StateReport) -> str:
    mark = "none" if report.watermark_ms is None else datetime.fromtimestamp(
        report.watermark_ms / 1000, UTC).isoformat(timespec="milliseconds")
    if report.uncommitted:
        # Not "state as of batch None ... no stateful operator": the operators are there.
        lines = [f"{report.checkpoint}: no committed batch, no state to read"]
        lines.extend(f"operator {op}: no committed state" for op in report.uncommitted)
        return "\n".join(map(printable, lines))
    as_of = "no committed state" if report.batch_id is None else (
        f"state as of batch {report.batch_id}")
    lines = [f"{report.checkpoint}: {as_of}, watermark {mark}"]
    if not report.operators:
        lines.append("  no stateful operator")
    for op in report.operators:
        lines.append(f"operator {op.operator_id} {op.operator_name}: {op.rows:,} rows, "
                     f"{fmt_bytes(op.bytes)}")
        for s in op.stores:
            lines.extend("  " + line for line in _store_lines(s))
    # Keys are the app's data: one holding a newline or an ESC must not forge or redraw lines.
    return "\n".join(map(printable, lines))


def _store_lines(s: StoreReport) -> list[str]:
    sk = skew(s.partitions)
    kind = "state variable" if s.target.state_var else "store"
    worst = ", ".join(f"{p.partition_id} ({p.rows:,} rows, {fmt_bytes(p.bytes)})" for p in sk.worst)
    lines = [
        f"{kind} {s.target.label}: {s.rows:,} rows, {fmt_bytes(s.bytes)} in {len(s.partitions)} "
        f"partitions",
        f"  key {s.key_schema}",
        f"  value {s.value_schema}",
        f"  per partition: max {sk.max_rows:,} rows / {fmt_bytes(sk.max_bytes)}, median "
        f"{sk.median_rows:,.0f} rows / {fmt_bytes(sk.median_bytes)}, skew {sk.ratio:.1f}x"
        + (f"; largest: {worst}" if worst else ""),
    ]
    if s.expired_rows:
        lines.append(f"  {s.expired_rows:,} rows behind the watermark ({s.time_field})")
    if s.top_keys:
        by = ", ".join(s.key_fields) or "whole key"
        lines.append(f"  top keys by bytes, of {s.keys:,} (grouped by {by}):")
        total = max(1, s.bytes)
        lines.extend(f"    {k.key}  {k.rows:,} rows  {fmt_bytes(k.bytes)}  {k.bytes / total:.1%}"
                     for k in s.top_keys)
    if s.changes is not None:
        c = s.changes
        lines.append(f"  changes in batches {c.from_batch}..{c.to_batch}: {c.puts:,} puts, "
                     f"{c.removes:,} removes")
        lines.extend(f"    + {k}" for k in c.keys_put)
        lines.extend(f"    - {k}" for k in c.keys_removed)
    return lines
