"""Inspect checkpoints for doctor: the state report plus each store's recent growth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sparkwatch.doctor.checks_contents import Inspected
from sparkwatch.state.changes import MIN_GROWTH_BATCHES, RECENT_BATCHES, recent_growth
from sparkwatch.state.inspect import Request, inspect
from sparkwatch.state.model import Growth

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TOP_KEYS = 3


def inspect_checkpoint(spark: SparkSession, checkpoint: str) -> Inspected:
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
