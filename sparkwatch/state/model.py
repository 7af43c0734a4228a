"""The report of one checkpoint's state: plain data, shared by the table, the JSON and doctor."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Target:
    """One readable store: a store of an operator, or one state variable of transformWithState."""

    operator_id: int
    operator_name: str
    store_name: str
    partitions: int
    min_batch: int
    max_batch: int
    state_var: str | None = None

    @property
    def label(self) -> str:
        return self.state_var or self.store_name


@dataclass(frozen=True, slots=True)
class Partition:
    partition_id: int
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Key:
    """A key as JSON with the rows and bytes it owns (time fields and the join's row index left
    out, so a key that owns a row per window or per join match counts once)."""

    key: str
    rows: int
    bytes: int


@dataclass(frozen=True, slots=True)
class Changes:
    """What the change feed recorded between two batches."""

    from_batch: int
    to_batch: int
    puts: int
    removes: int
    keys_put: tuple[str, ...]
    keys_removed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Growth:
    """A store's rows at two batches and the change feed between them."""

    rows_from: int
    rows_to: int
    changes: Changes


@dataclass(frozen=True, slots=True)
class StoreReport:
    target: Target
    key_schema: str
    value_schema: str
    partitions: tuple[Partition, ...]
    """Every partition of the store, empty ones included, by id."""
    top_keys: tuple[Key, ...]
    key_fields: tuple[str, ...]
    """The key fields the top keys are grouped by."""
    keys: int = 0
    """Distinct keys (grouped by ``key_fields``)."""
    expired_rows: int | None = None
    """Rows whose event time in the key is behind the watermark (None: no event time in the key
    or no watermark)."""
    time_field: str | None = None
    changes: Changes | None = None

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)


@dataclass(frozen=True, slots=True)
class OperatorReport:
    operator_id: int
    operator_name: str
    stores: tuple[StoreReport, ...]

    @property
    def rows(self) -> int:
        """Rows as Spark's numRowsTotal counts them: a join counts its buffered input rows (the
        keyWithIndexToValue stores), not the per-key counters beside them."""
        if self.operator_name == "symmetricHashJoin":
            return sum(s.rows for s in self.stores if s.target.store_name.endswith("IndexToValue"))
        return sum(s.rows for s in self.stores)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.stores)


@dataclass(frozen=True, slots=True)
class StateReport:
    checkpoint: str
    batch_id: int | None
    """The batch whose committed state was read (None: no committed state)."""
    watermark_ms: int | None
    operators: tuple[OperatorReport, ...] = field(default_factory=tuple)
    uncommitted: tuple[str, ...] = ()
    """Stateful operators ("0 stateStoreSave") whose state metadata is written but no batch of
    which is committed (a query that failed in its first batch, a commit log removed): reported
    as "no stateful operator" before."""
