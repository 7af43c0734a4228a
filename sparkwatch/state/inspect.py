"""Inspect a checkpoint: every store (or the chosen ones) measured as of one batch."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sparkwatch.state import profile
from sparkwatch.state.changes import changes
from sparkwatch.state.model import OperatorReport, StateReport, StoreReport, Target
from sparkwatch.state.source import (
    StateError,
    is_checkpoint,
    readable_location,
    require_spark_4,
    spark_reason,
    store_frame,
    targets,
    watermark_ms,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Reporter = Callable[[str], AbstractContextManager[None]]
"""Wraps each store's read (e.g. in a progress line); gets the store's label."""


@dataclass(frozen=True, slots=True)
class Request:
    checkpoint: str
    operator: int | None = None
    store: str | None = None
    """A store name, or a transformWithState state variable."""
    batch_id: int | None = None
    top: int = 10
    changes: tuple[int, int] | None = None


def chosen(all_targets: list[Target], req: Request) -> list[Target]:
    if not all_targets and (req.operator is not None or req.store is not None):
        # A stateless query's checkpoint: the filter answered with an empty report, as if the
        # operator or store were there and empty.
        given = " ".join(f"--{flag} {value}" for flag, value in
                         (("operator", req.operator), ("store", req.store)) if value is not None)
        raise StateError(f"nothing matches {given}: the checkpoint has no state stores")
    picked = [t for t in all_targets
              if (req.operator is None or t.operator_id == req.operator)
              and (req.store is None or req.store in (t.store_name, t.state_var))]
    if all_targets and not picked:
        known = ", ".join(sorted({f"{t.operator_id}:{t.label}" for t in all_targets}))
        raise StateError(f"no operator/store matches --operator {req.operator} --store "
                         f"{req.store}; the checkpoint has {known}")
    return picked


def check_batches(latest: int | None, req: Request) -> None:
    """Refuse ``--batch-id`` or ``--changes`` past the ``latest`` committed batch, naming the
    flag; Spark's own refusal (STDS_COMMITTED_BATCH_UNAVAILABLE) named neither it nor the
    latest."""
    if latest is None:
        return
    if req.batch_id is not None and req.batch_id > latest:
        raise StateError(f"--batch-id {req.batch_id}: the checkpoint's latest committed batch "
                         f"is {latest}")
    if req.changes is not None and req.changes[1] > latest:
        first, last = req.changes
        raise StateError(f"--changes {first}..{last}: the checkpoint's latest committed batch "
                         f"is {latest}")


def inspect(spark: SparkSession, req: Request, reporter: Reporter | None = None) -> StateReport:
    require_spark_4(spark.version)
    with readable_location(req.checkpoint) as where:
        if where == req.checkpoint:
            return _inspect(spark, req, reporter)
        report = _inspect(spark, replace(req, checkpoint=where), reporter)
    return replace(report, checkpoint=req.checkpoint)


def _inspect(spark: SparkSession, req: Request, reporter: Reporter | None) -> StateReport:
    try:
        found = targets(spark, req.checkpoint)
    except Exception as exc:  # noqa: BLE001 - a path that is no checkpoint, unreadable, ...
        raise StateError(
            f"cannot read the state metadata of {req.checkpoint}: {spark_reason(exc)}"
        ) from exc
    if not found and not is_checkpoint(spark, req.checkpoint):
        raise StateError(f"{req.checkpoint} is not a streaming checkpoint (no offsets log)")
    picked = chosen(found, req)
    latest = max((t.max_batch for t in found), default=None)
    if latest is not None and latest < 0:
        # Its state metadata is written, no batch committed yet (a query that failed in its
        # first batch): no state to read, where Spark refused batchId -1 for every store.
        if req.batch_id is not None or req.changes is not None:
            raise StateError(f"{req.checkpoint} has no committed batch yet")
        pending = tuple(f"{op_id} {name}" for op_id, name in
                        sorted({(t.operator_id, t.operator_name) for t in picked}))
        return StateReport(req.checkpoint, None, None, (), uncommitted=pending)
    check_batches(latest, req)
    batch = req.batch_id if req.batch_id is not None else latest
    mark = watermark_ms(spark, req.checkpoint, batch) if batch is not None else None
    stores = []
    for t in picked:
        try:
            stores.append(_store(spark, req, t, batch, mark, reporter))
        except StateError:
            raise
        except Exception as exc:  # noqa: BLE001 - Spark's reason, in one line
            raise StateError(f"cannot read operator {t.operator_id} {t.label} of "
                             f"{req.checkpoint}: {spark_reason(exc)}") from exc
    ops = []
    for op_id in sorted({t.operator_id for t in picked}):
        own = tuple(s for s in stores if s.target.operator_id == op_id)
        ops.append(OperatorReport(op_id, own[0].target.operator_name, own))
    return StateReport(req.checkpoint, batch, mark, tuple(ops))


def _store(spark: SparkSession, req: Request, t: Target, batch: int | None, mark: int | None,
           reporter: Reporter | None) -> StoreReport:
    from pyspark.sql.types import StructType

    wrap = reporter(f"operator {t.operator_id} {t.label}") if reporter else nullcontext()
    with wrap:
        df = store_frame(spark, req.checkpoint, t, batch)
        key_type = df.schema["key"].dataType
        assert isinstance(key_type, StructType)  # the State Data Source's key is a struct
        shape = profile.shape(key_type, t.store_name, t.operator_name)
        measured = profile.sized(df)
        keys, top = profile.top_keys(measured, shape, req.top)
        partitions, expired = profile.partitions(measured, t.partitions, shape, mark)
        report = StoreReport(
            target=t,
            key_schema=key_type.simpleString(),
            value_schema=df.schema["value"].dataType.simpleString(),
            partitions=partitions,
            top_keys=top,
            key_fields=shape.fields,
            keys=keys,
            expired_rows=expired,
            time_field=shape.time_field,
            changes=(changes(spark, req.checkpoint, t, *req.changes, req.top)
                     if req.changes else None),
        )
    return report
