"""Operator identity: what each entry of a progress's ``stateOperators`` is in the physical plan.

A progress says ``stateStoreSave`` at position 0; the plan says "StateStoreSave on [window, key],
append, watermark on ts with a 5 s delay, 200 state stores, RocksDB, checkpoint .../state/0".
:class:`RawPlan` is what the listener reads from the JVM (and what test fixtures capture);
:class:`QueryPlan` is the parsed identity of every state operator of one run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Source(StrEnum):
    PLAN = "plan"
    """Read from the executed physical plan."""
    PROGRESS = "progress"
    """Only what the progress says (Spark Connect, unreadable or unmatched plan)."""


@dataclass(frozen=True, slots=True)
class RawPlan:
    """The executed plan of one run as read from the JVM, before parsing."""

    query_id: str
    run_id: str
    batch_id: int
    tree: str
    """``lastExecution.executedPlan.treeString``."""
    output_mode: str | None = None
    """``lastExecution.outputMode`` (Append, Update, Complete)."""
    state_checkpoint: str | None = None
    """``lastExecution.checkpointLocation``: the state root, ``<checkpoint>/state``."""
    conf: Mapping[str, str] = field(default_factory=dict)
    """The few Spark settings that matter to state (see :data:`sparkwatch.plan.settings`)."""
    trigger: str | None = None
    """The query's trigger as Spark prints it (``RealTimeTrigger(5000)``), see
    :mod:`sparkwatch.plan.trigger`."""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "conf": dict(self.conf)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RawPlan:
        return cls(
            query_id=str(data["query_id"]),
            run_id=str(data["run_id"]),
            batch_id=int(data["batch_id"]),
            tree=str(data["tree"]),
            output_mode=data.get("output_mode"),
            state_checkpoint=data.get("state_checkpoint"),
            conf={str(k): str(v) for k, v in (data.get("conf") or {}).items()},
            trigger=data.get("trigger"),
        )


@dataclass(frozen=True, slots=True)
class Watermark:
    """One ``withWatermark`` upstream of an operator."""

    column: str
    delay_ms: int | None


@dataclass(frozen=True, slots=True)
class OperatorIdentity:
    """One state operator, joined to the progress by ``index`` (its ``stateOperators`` position)."""

    index: int
    operator: str
    """Spark's ``operatorName`` in the progress."""
    kind: str
    """aggregation, session_window, dedupe, dedupe_within_watermark, stream_stream_join,
    global_limit, flat_map_groups_with_state, apply_in_pandas_with_state, transform_with_state,
    transform_with_state_in_pandas, transform_with_state_in_pyspark or unknown."""
    node: str | None = None
    """Physical plan node, e.g. ``StateStoreSave``."""
    operator_id: int | None = None
    """``opId`` of the state info: the operator's directory under the state checkpoint."""
    keys: tuple[str, ...] = ()
    """Grouping, deduplication or (left) join keys."""
    event_time_keys: tuple[str, ...] = ()
    """Keys carrying a watermark: only with one can state be evicted by event time."""
    output_mode: str | None = None
    watermarks: tuple[Watermark, ...] = ()
    """Every ``withWatermark`` upstream (two for a join with both sides watermarked)."""
    num_state_stores: int | None = None
    state_store_provider: str | None = None
    checkpoint_location: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    """Kind-specific facts: join type and state cleanup, limit, timeout or time mode."""

    @property
    def watermark_column(self) -> str | None:
        names = sorted({w.column for w in self.watermarks})
        return ",".join(names) if names else None

    @property
    def watermark_delay_ms(self) -> int | None:
        """The largest delay upstream (how long late rows are waited for, the most cautious)."""
        delays = [w.delay_ms for w in self.watermarks if w.delay_ms is not None]
        return max(delays) if delays else None


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """Identity of every state operator of one run of a query."""

    query_id: str
    run_id: str
    source: Source
    operators: tuple[OperatorIdentity, ...]
    batch_id: int | None = None
    """The batch whose plan was read."""
    read_at: float = 0.0
    note: str | None = None
    """Why only the progress was used, when :attr:`source` is PROGRESS."""
    settings: Mapping[str, str] = field(default_factory=dict)
    trigger: str | None = None
    """The run's trigger kind (:data:`sparkwatch.plan.trigger.KINDS`); None when unknown
    (Spark Connect, a plan not read)."""
    trigger_interval_ms: int | None = None
    """Its interval (processing time, continuous checkpoint, real-time batch duration)."""

    def operator(self, index: int) -> OperatorIdentity | None:
        for op in self.operators:
            if op.index == index:
                return op
        return None
