"""Which physical nodes write state, what Spark calls them in the progress, and their kind.

Only nodes implementing ``StateStoreWriter`` appear in ``stateOperators``; the restore half of an
aggregation (``StateStoreRestore``) reads state and is not listed.
"""

from __future__ import annotations

UNKNOWN = "unknown"

# progress operatorName -> kind (the label users filter on; stable across Spark versions)
KIND_BY_OPERATOR: dict[str, str] = {
    "stateStoreSave": "aggregation",
    "sessionWindowStateStoreSaveExec": "session_window",
    "defaultName": "session_window",  # 3.4/3.5: the only writer without a short name
    "dedupe": "dedupe",
    "dedupeWithinWatermark": "dedupe_within_watermark",
    "symmetricHashJoin": "stream_stream_join",
    "globalLimit": "global_limit",
    "flatMapGroupsWithState": "flat_map_groups_with_state",
    "applyInPandasWithState": "apply_in_pandas_with_state",
    "transformWithStateExec": "transform_with_state",
    "transformWithStateInPandasExec": "transform_with_state_in_pandas",
    "transformWithStateInPySparkExec": "transform_with_state_in_pyspark",
}

# physical node name -> the operatorNames Spark reports for it
WRITER_NODES: dict[str, tuple[str, ...]] = {
    "StateStoreSave": ("stateStoreSave",),
    "SessionWindowStateStoreSave": ("sessionWindowStateStoreSaveExec", "defaultName"),
    "StreamingDeduplicate": ("dedupe",),
    "StreamingDeduplicateWithinWatermark": ("dedupeWithinWatermark",),
    "StreamingSymmetricHashJoin": ("symmetricHashJoin",),
    "StreamingGlobalLimit": ("globalLimit",),
    "FlatMapGroupsWithState": ("flatMapGroupsWithState",),
    "FlatMapGroupsInPandasWithState": ("applyInPandasWithState",),
    "TransformWithState": ("transformWithStateExec",),
    "TransformWithStateInPandas": ("transformWithStateInPandasExec",),
    # 4.1+: one node for both Python APIs; the progress name tells pandas from rows.
    "TransformWithStateInPySpark": (
        "transformWithStateInPandasExec",
        "transformWithStateInPySparkExec",
    ),
}

# Nodes with state info that only read state: never in stateOperators.
READER_NODES = frozenset({"StateStoreRestore", "SessionWindowStateStoreRestore"})

_KIND_BY_NODE = {
    "StateStoreSave": "aggregation",
    "SessionWindowStateStoreSave": "session_window",
    "StreamingDeduplicate": "dedupe",
    "StreamingDeduplicateWithinWatermark": "dedupe_within_watermark",
    "StreamingSymmetricHashJoin": "stream_stream_join",
    "StreamingGlobalLimit": "global_limit",
    "FlatMapGroupsWithState": "flat_map_groups_with_state",
    "FlatMapGroupsInPandasWithState": "apply_in_pandas_with_state",
    "TransformWithState": "transform_with_state",
    "TransformWithStateInPandas": "transform_with_state_in_pandas",
    "TransformWithStateInPySpark": "transform_with_state_in_pandas",
}


def kind_of(operator: str, node: str | None = None) -> str:
    """The kind from the progress name, else from the node (a name a newer Spark introduced)."""
    kind = KIND_BY_OPERATOR.get(operator)
    if kind is None and node is not None:
        kind = _KIND_BY_NODE.get(node)
    return kind or UNKNOWN


def matches(node: str, operator: str) -> bool:
    """Whether a writer node can be the progress entry ``operator`` (unknown nodes: any)."""
    names = WRITER_NODES.get(node)
    return names is None or operator in names
