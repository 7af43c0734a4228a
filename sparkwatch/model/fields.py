"""The one table of ``StateOperatorProgress`` fields: Spark's JSON name, the event model's
attribute (also the history column), type, unit, range, whether Spark reports it as a counter
over the batch (a delta the metrics accumulate into a ``_total``) or as a level, and the stem of
its metric names with their help.

Every consumer takes its operator fields from here (``tests/test_fields.py`` lists them): the
event model's :class:`~sparkwatch.model.events.StateOperator`, the parser (and the history
writer's typed reader of the spool, ``collector/typedwire.py``), the validation
contract and its OpenAPI schema, the history schema (``operator_batches`` columns), row builder
and :class:`~sparkwatch.history.views.StatePoint`, the metric catalogue's state families, the
metric state's totals and both expositions, the rollups' sums of counters. Adding a field is one
entry here, plus a history migration for its column and a line in the two type-checking stubs
(events, views), which a test compares with this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["rows", "milliseconds", "bytes", "partitions", "stores"]

BASE_UNITS: dict[str, tuple[str, int]] = {
    "milliseconds": ("seconds", 1000),
    "bytes": ("bytes", 1),
}
"""Unit -> (Prometheus base unit, amount per base unit) for units that have one; counts
(rows, partitions, stores) have none."""


@dataclass(frozen=True, slots=True)
class OperatorField:
    json: str
    """the key in Spark's JSON"""
    attr: str
    """the event model's attribute and the history column"""
    unit: Unit
    counter: bool
    """True: this batch's amount (summed over batches); False: a level at the batch's end"""
    help: str
    metric: str
    """stem of the metric names: a level is the gauge ``state_<stem>[_<base unit>]``; a counter
    the counter ``state_<stem>[_<base unit>]_total`` and the last-batch gauge
    ``state_last_batch_<stem>[_<base unit>]``"""
    metric_help: str = ""
    """help of the level's gauge or the counter's ``_total`` (empty: ``help``)"""
    last_help: str = ""
    """counters: help of the last-batch gauge"""
    type: type = int
    minimum: int = 0
    """Spark's counts, times and sizes are never negative"""

    @property
    def base_unit(self) -> str:
        """The metric names' unit suffix (``seconds`` for milliseconds), or ''."""
        return BASE_UNITS.get(self.unit, ("", 1))[0]

    @property
    def per_base_unit(self) -> int:
        """What one base unit is in Spark's unit (1000 ms a second); metrics divide by it."""
        return BASE_UNITS.get(self.unit, ("", 1))[1]


OPERATOR_FIELDS: tuple[OperatorField, ...] = (
    OperatorField("numRowsTotal", "num_rows_total", "rows", False,
                  "Rows held in the operator's state.", "rows"),
    OperatorField("numRowsUpdated", "num_rows_updated", "rows", True,
                  "Rows updated in the state by the batch.", "rows_updated",
                  "State rows updated, summed over batches.",
                  "State rows updated in the last batch."),
    OperatorField("allUpdatesTimeMs", "all_updates_time_ms", "milliseconds", True,
                  "Time spent updating the state.", "update_time",
                  "Time spent updating state, summed over batches.",
                  "Time updating state in the last batch."),
    OperatorField("numRowsRemoved", "num_rows_removed", "rows", True,
                  "Rows removed (evicted) from the state by the batch.", "rows_removed",
                  "State rows removed (evicted), summed over batches.",
                  "State rows removed in the last batch."),
    OperatorField("allRemovalsTimeMs", "all_removals_time_ms", "milliseconds", True,
                  "Time spent removing rows from the state.", "removal_time",
                  "Time spent removing state, summed over batches.",
                  "Time removing state in the last batch."),
    OperatorField("commitTimeMs", "commit_time_ms", "milliseconds", True,
                  "Time spent committing the state stores.", "commit_time",
                  "Time spent committing state, summed over batches.",
                  "Time committing state in the last batch."),
    OperatorField("memoryUsedBytes", "memory_used_bytes", "bytes", False,
                  "Memory used by the operator's state stores.", "memory_used"),
    OperatorField("numRowsDroppedByWatermark", "num_rows_dropped_by_watermark", "rows", True,
                  "Input rows dropped as later than the watermark.", "rows_dropped_by_watermark",
                  "Late input rows dropped by the watermark, summed over batches.",
                  "Late rows dropped in the last batch."),
    OperatorField("numShufflePartitions", "num_shuffle_partitions", "partitions", False,
                  "Shuffle partitions of the operator.", "shuffle_partitions"),
    OperatorField("numStateStoreInstances", "num_state_store_instances", "stores", False,
                  "State store instances of the operator.", "store_instances",
                  "State store instances (4 per partition for a stream-stream join)."),
)
"""In :class:`~sparkwatch.model.events.StateOperator`'s field order after index and name."""
