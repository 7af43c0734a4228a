"""What the history reader returns: plain frozen dataclasses, JSON-ready via :func:`to_dict`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, make_dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sparkwatch.model.events import QueryProgress, StateOperator
from sparkwatch.model.fields import OPERATOR_FIELDS


@dataclass(frozen=True, slots=True)
class QuerySummary:
    """A query (stable ``query_id`` across restarts) with its latest run."""

    query_id: str
    name: str | None
    app_name: str
    latest_run_id: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    last_event_at: datetime
    runs: int
    batches: int
    last_batch_id: int | None
    last_progress_at: datetime | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    run_id: str
    query_id: str
    name: str | None
    app_name: str
    app_id: str
    spark_version: str
    status: str
    started_at: datetime | None
    ended_at: datetime | None
    last_event_at: datetime
    exception: str | None
    """At most the first ``EXCEPTION_EXCERPT_CHARS`` (1,000) of the run's exception (reader)."""
    exception_chars: int | None
    """The whole exception's length in characters: more than ``exception``'s when it was cut."""
    error_class: str | None
    batches: int
    first_batch_id: int | None
    last_batch_id: int | None


if TYPE_CHECKING:
    # What mypy sees of the class built below from the field table; tests/test_fields.py
    # proves the two have the same fields in the same order.
    @dataclass(frozen=True, slots=True)
    class StatePoint:
        """One state operator in one batch."""

        timestamp: datetime
        run_id: str
        batch_id: int
        operator_index: int
        operator_name: str
        num_rows_total: int
        num_rows_updated: int
        all_updates_time_ms: int
        num_rows_removed: int
        all_removals_time_ms: int
        commit_time_ms: int
        memory_used_bytes: int
        num_rows_dropped_by_watermark: int
        num_shuffle_partitions: int
        num_state_store_instances: int
        custom_metrics: dict[str, Any] = field(default_factory=dict)
else:
    StatePoint = make_dataclass(
        "StatePoint",
        [("timestamp", datetime), ("run_id", str), ("batch_id", int), ("operator_index", int),
         ("operator_name", str), *((f.attr, f.type) for f in OPERATOR_FIELDS),
         ("custom_metrics", dict[str, Any], field(default_factory=dict))],
        frozen=True, slots=True,
    )
    StatePoint.__module__ = __name__
    StatePoint.__doc__ = ("One state operator in one batch (its ``operator_batches`` row; the "
                          "fields after operator_name are the field table's).")


STATE_POINT_NUMBERS = ("batch_id", "operator_index", *(f.attr for f in OPERATOR_FIELDS))
"""The fields of a :class:`StatePoint` that are numbers, none of which may be absent (their
``operator_batches`` columns are NOT NULL)."""


def state_point(row: Mapping[Any, Any]) -> StatePoint:
    """The point of a mapping with its fields (and maybe more): an ``operator_batches`` row or
    an item of the state API (timestamp as ISO-8601, ``custom_metrics`` maybe null). Every reader
    of state points builds them here (the reader's state, doctor, the console), so that a custom
    metrics column holding other JSON than a map is an empty map for all of them."""
    values = {name: row[name] for name in StatePoint.__dataclass_fields__}
    if isinstance(values["timestamp"], str):
        values["timestamp"] = datetime.fromisoformat(values["timestamp"])
    values["custom_metrics"] = json_map(values["custom_metrics"])
    return StatePoint(**values)


def json_map(value: Any) -> dict[str, Any]:
    """A JSON column that holds a map as the writer writes it, as a dict; any other JSON (a
    SQLite history's list, string or number, or null) as an empty map: ``dict()`` of a list was a
    traceback (the console's query page), and a list passed on as it was answered 500 where the
    API promises a map."""
    return dict(value) if isinstance(value, Mapping) else {}


def progress_points(p: QueryProgress) -> list[StatePoint]:
    """The points of a progress's state operators, as the history would read them back."""
    at = datetime.fromtimestamp(p.timestamp, tz=UTC)
    return [StatePoint(timestamp=at, run_id=p.run_id, batch_id=p.batch_id,
                       operator_index=op.index, operator_name=op.name, **_fields(op),
                       custom_metrics=dict(op.custom_metrics))
            for op in p.state_operators]


def _fields(op: StateOperator) -> dict[str, Any]:
    return {f.attr: getattr(op, f.attr) for f in OPERATOR_FIELDS}


def to_dict(view: QuerySummary | RunSummary | StatePoint) -> dict[str, Any]:
    """A JSON-ready dict: datetimes as ISO-8601 UTC strings."""
    return {k: _jsonable(v) for k, v in asdict(view).items()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value
