"""Inspect checkpoints for doctor: the state report plus each store's recent growth."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sparkwatch.doctor.checks_contents import Inspected
from sparkwatch.interrupts import interrupt_within
from sparkwatch.state.changes import MIN_GROWTH_BATCHES, RECENT_BATCHES, recent_growth
from sparkwatch.state.inspect import Request, inspect
from sparkwatch.state.model import Growth, StateReport
from sparkwatch.state.source import StateError, readable_location, spark_reason

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOP_KEYS = 3


def inspect_checkpoint(spark: SparkSession, checkpoint: str) -> Inspected:
    """One checkpoint's state; one that cannot be read (not a checkpoint, a corrupt file) is an
    ``Inspected`` with its ``error``: the first broken checkpoint of twenty ended doctor with
    exit 2 and none of the others reported. A signal's interrupt still ends the command."""
    try:
        with readable_location(checkpoint) as where:
            found = _inspect(spark, where)
    except Exception as exc:  # noqa: BLE001 - whatever Spark raised, as the checkpoint's error
        if interrupt_within(exc) is not None:
            # Ctrl-C or SIGTERM inside a Py4J call, come back as a failed read: the command
            # stops (130/143), it does not go on to the next checkpoint.
            raise
        if isinstance(exc, StateError):
            return Inspected(StateReport(checkpoint, None, None, ()), {}, error=str(exc))
        return Inspected(StateReport(checkpoint, None, None, ()), {},
                         error=f"cannot read the state of {checkpoint}: {spark_reason(exc)}")
    return replace(found, report=replace(found.report, checkpoint=checkpoint))


def _inspect(spark: SparkSession, checkpoint: str) -> Inspected:
    report = inspect(spark, Request(checkpoint, top=TOP_KEYS))
    growth: dict[tuple[int, str], Growth] = {}
    if report.batch_id is None:
        return Inspected(report, growth)
    # A watermark evicts only once event time has passed its delay: over the first few batches
    # state under a watermark only grows, so it is judged over a full window of batches.
    least = RECENT_BATCHES if report.watermark_ms is not None else MIN_GROWTH_BATCHES
    for op in report.operators:
        for store in op.stores:
            g = recent_growth(spark, checkpoint, store.target, report.batch_id, store.rows,
                              least=least)
            if g is not None:
                growth[(op.operator_id, store.target.label)] = g
    return Inspected(report, growth)
