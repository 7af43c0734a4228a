"""Events straight to COPY values for the per-batch tables (PostgreSQL's fast path).

:func:`~sparkwatch.history.rows.rows_for` builds every row as a dict (what executemany needs),
and COPY then took each dict apart again into a list and its maps into JSON text: two passes and
a dict per row, a third of the history writer's row work (docs/benchmarks.md, "A write path near
the floor"). Here each row is built once, as the list COPY writes, in the columns and with the
values the dicts hold: ``tests/test_history_copyrows.py`` holds the two to each other, value for
value, and writes both to compare what PostgreSQL stores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sparkwatch.history.columns import from_epoch
from sparkwatch.history.copy import TABLES, copy_statement
from sparkwatch.history.rows import (
    DURATION_COLUMNS,
    OPERATOR_ATTRS,
    json_safe,
    nul_free,
    operator_values,
    unique_batches,
)
from sparkwatch.jsoncodec import dumps_text, try_dumps
from sparkwatch.model.events import ParsedEvent, QueryProgress

_CHILD = ("run_id", "batch_id", "query_id", "timestamp")
COLUMNS: dict[str, tuple[str, ...]] = {
    "batches": (*_CHILD, "batch_duration_ms", "num_input_rows", "input_rows_per_second",
                "processed_rows_per_second", "duration_ms", "event_time_min", "event_time_max",
                "event_time_avg", "watermark", "observed_metrics", *DURATION_COLUMNS.values()),
    "operators": (*_CHILD, "operator_index", "operator_name", *OPERATOR_ATTRS,
                  "custom_metrics"),
    "sources": (*_CHILD, "source_index", "description", "start_offset", "end_offset",
                "latest_offset", "num_input_rows", "input_rows_per_second",
                "processed_rows_per_second", "metrics"),
    "sinks": (*_CHILD, "description", "num_output_rows", "metrics"),
}
"""Each table's columns, in the order of :mod:`.rows`' dicts (its keys)."""
_DURATION_KEYS = tuple(DURATION_COLUMNS)


@dataclass(slots=True)
class CopyRows:
    """The per-batch tables' COPY values of one write, and what the writer needs of them."""

    values: dict[str, list[list[Any]]] = field(
        default_factory=lambda: {name: [] for name in COLUMNS})
    batch_runs: list[str] = field(default_factory=list)
    """the run of each batch row (each run's count of batches gained)"""
    newest: datetime | None = None
    """the latest batch timestamp (the partitions it needs)"""

    def statements(self) -> list[tuple[str, list[list[Any]]]]:
        """Each table's COPY statement and values, parents first, tables with no rows left out."""
        return [(_STATEMENTS[name], self.values[name]) for _, name in TABLES if self.values[name]]


_STATEMENTS = {name: copy_statement(model.__tablename__, COLUMNS[name]) for model, name in TABLES}


def copy_rows(events: Sequence[ParsedEvent]) -> CopyRows:
    """The batch, operator, source and sink rows of ``events`` as COPY values: one row per
    (run, batch), the first of a write's duplicates kept (as :func:`.rows.rows_for`). A JSON
    column's value is its text (:func:`_json_text`; the batch's duration map as it came), which
    SQLite's fast path (:mod:`.sqlite_rows`) stores too."""
    out = CopyRows()
    batches, operators = out.values["batches"], out.values["operators"]
    sources, sinks = out.values["sources"], out.values["sinks"]
    for p in unique_batches(events):
        timestamp = from_epoch(p.timestamp)
        assert timestamp is not None  # a progress event always has its time
        child = [p.run_id, p.batch_id, p.query_id, timestamp]
        batches.append(_batch(p, child))
        out.batch_runs.append(p.run_id)
        if out.newest is None or timestamp > out.newest:
            out.newest = timestamp
        operators.extend([*child, op.index, nul_free(op.name), *operator_values(op),
                          _json_text(op.custom_metrics)] for op in p.state_operators)
        sources.extend([*child, s.index, nul_free(s.description), _json_text(s.start_offset),
                        _json_text(s.end_offset), _json_text(s.latest_offset),
                        s.num_input_rows, s.input_rows_per_second, s.processed_rows_per_second,
                        _json_text(s.metrics)] for s in p.sources)
        if p.sink is not None:
            sinks.append([*child, nul_free(p.sink.description), p.sink.num_output_rows,
                          _json_text(p.sink.metrics)])
    return out


def _batch(p: QueryProgress, child: list[Any]) -> list[Any]:
    durations = p.duration_ms
    event_time = p.event_time
    return [*child, p.batch_duration_ms, p.num_input_rows, p.input_rows_per_second,
            p.processed_rows_per_second, dumps_text(dict(durations)),
            from_epoch(event_time.min), from_epoch(event_time.max), from_epoch(event_time.avg),
            from_epoch(event_time.watermark), _json_text(p.observed_metrics),
            *map(durations.get, _DURATION_KEYS)]


def _json_text(value: Any) -> str | None:
    """A JSON column's COPY value: ``dumps_text(json_safe(value))``, NULL for None (as
    ``copy._converter`` makes of a dict row).

    Encoded first as it is, which is the answer whenever :func:`~.rows.json_safe` would change
    nothing: what it changes (a NaN or an infinity, a NUL, a key that is not a string, a mapping
    or sequence of another type) orjson writes as ``null`` or ``\\u0000``, or refuses; any of
    those (or a real null) takes the long way. Walking each map in Python first cost more than
    encoding it."""
    if value is None:
        return None
    text = try_dumps(value)
    if text is not None and b"null" not in text and b"\\u0000" not in text:
        return text.decode()
    safe = json_safe(value)
    return None if safe is None else dumps_text(safe)
