"""The one table of ``StateOperatorProgress`` fields: Spark's JSON name, the event model's
attribute (also the history column), type, unit, range and whether Spark reports it as a
counter over the batch (a delta the metrics accumulate into a ``_total``) or as a level.

The parser, the validation contract and its OpenAPI schema, and the history row builder take
their operator fields from here; adding a field is one line here (plus a history migration).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Unit = Literal["rows", "milliseconds", "bytes", "partitions", "stores"]


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
    type: type = int
    minimum: int = 0
    """Spark's counts, times and sizes are never negative"""


OPERATOR_FIELDS: tuple[OperatorField, ...] = (
    OperatorField("numRowsTotal", "num_rows_total", "rows", False,
                  "Rows held in the operator's state."),
    OperatorField("numRowsUpdated", "num_rows_updated", "rows", True,
                  "Rows updated in the state by the batch."),
    OperatorField("allUpdatesTimeMs", "all_updates_time_ms", "milliseconds", True,
                  "Time spent updating the state."),
    OperatorField("numRowsRemoved", "num_rows_removed", "rows", True,
                  "Rows removed (evicted) from the state by the batch."),
    OperatorField("allRemovalsTimeMs", "all_removals_time_ms", "milliseconds", True,
                  "Time spent removing rows from the state."),
    OperatorField("commitTimeMs", "commit_time_ms", "milliseconds", True,
                  "Time spent committing the state stores."),
    OperatorField("memoryUsedBytes", "memory_used_bytes", "bytes", False,
                  "Memory used by the operator's state stores."),
    OperatorField("numRowsDroppedByWatermark", "num_rows_dropped_by_watermark", "rows", True,
                  "Input rows dropped as later than the watermark."),
    OperatorField("numShufflePartitions", "num_shuffle_partitions", "partitions", False,
                  "Shuffle partitions of the operator."),
    OperatorField("numStateStoreInstances", "num_state_store_instances", "stores", False,
                  "State store instances of the operator."),
)
"""In :class:`~sparkwatch.model.events.StateOperator`'s field order after index and name."""
