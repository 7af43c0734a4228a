"""Helpers shared by the history tests (this module has no tests of its own).

Samples are real Spark 4.x progress JSON (and one 3.5.9) copied from the shared sample set into
tests/fixtures/history/, so the tests do not depend on files outside the repository.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.history import migrate
from sparkwatch.history.schema import Batch, OperatorBatch, QueryRun, SinkBatch, SourceBatch
from sparkwatch.history.writer import HistoryWriter
from sparkwatch.model.events import AppInfo, Envelope, EventKind, ParsedEvent
from sparkwatch.model.parse import parse_envelope
from tests.support import create_database, drop_database

SAMPLES_DIR = Path(__file__).resolve().parent / "fixtures" / "history"
SAMPLES = sorted(p.stem for p in SAMPLES_DIR.glob("*.json"))
APP = AppInfo(name="orders-etl", id="app-20261121093000-0001", spark_version="4.3.0")
TABLES = {
    "query_runs": QueryRun,
    "batches": Batch,
    "operator_batches": OperatorBatch,
    "source_batches": SourceBatch,
    "sink_batches": SinkBatch,
}


def load_sample(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES_DIR / f"{name}.json").read_text())


def utc(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)


def event(kind: EventKind, payload: dict[str, Any], received_at: float = 0.0) -> ParsedEvent:
    envelope = Envelope(kind, APP, received_at or datetime.now(UTC).timestamp(), payload)
    return parse_envelope(envelope)


def progress(raw: dict[str, Any]) -> ParsedEvent:
    return event(EventKind.PROGRESS, raw)


def batch_of(raw: dict[str, Any], batch_id: int, timestamp: str, **changes: Any) -> dict[str, Any]:
    """A copy of a real progress as another batch of the same (or another) run."""
    out = copy.deepcopy(raw)
    out.update(batchId=batch_id, timestamp=timestamp, **changes)
    return out


def started(query_id: str, run_id: str, name: str | None, timestamp: str) -> ParsedEvent:
    payload = {"id": query_id, "runId": run_id, "name": name, "timestamp": timestamp}
    return event(EventKind.STARTED, payload)


def idle(query_id: str, run_id: str, timestamp: str) -> ParsedEvent:
    return event(EventKind.IDLE, {"id": query_id, "runId": run_id, "timestamp": timestamp})


def terminated(
    query_id: str,
    run_id: str,
    received_at: str,
    exception: str | None = None,
    error_class: str | None = None,
) -> ParsedEvent:
    payload = {
        "id": query_id,
        "runId": run_id,
        "exception": exception,
        "errorClassOnException": error_class,
    }
    return event(EventKind.TERMINATED, payload, received_at=utc(received_at).timestamp())


def migrated_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """Body of a module-scoped fixture parametrized "sqlite"/"postgresql": a migrated database
    shared by the module's tests (much faster than one per test; tests use their own run ids)."""
    if request.param == "sqlite":
        tmp: pytest.TempPathFactory = request.getfixturevalue("tmp_path_factory")
        url = f"sqlite:///{tmp.mktemp('history') / 'history.db'}"
        migrate.upgrade(url)
        yield url
        return
    admin_url: str = request.getfixturevalue("pg_admin_url")
    name = create_database(admin_url)
    url = sa.engine.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    yield url
    drop_database(admin_url, name)


@contextmanager
def writer(url: str) -> Iterator[HistoryWriter]:
    w = HistoryWriter(url)
    try:
        yield w
    finally:
        w.close()


def write(url: str, *events: ParsedEvent) -> None:
    with writer(url) as w:
        w.write(list(events))


@cache
def engine_for(url: str) -> sa.Engine:
    """One engine per database for the whole test run (dropped PG databases end its sessions)."""
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


def fetch(url: str, table: str, run_id: str | None = None) -> list[dict[str, Any]]:
    """Rows of a history table (of one run), read through the models' column types."""
    model_table = TABLES[table].__table__
    stmt = sa.select(model_table).order_by(*model_table.primary_key.columns)
    if run_id is not None:
        stmt = stmt.where(model_table.c.run_id == run_id)
    with engine_for(url).connect() as conn:
        return [dict(row) for row in conn.execute(stmt).mappings()]


def _count(model: Any) -> sa.Select[Any]:
    return sa.select(sa.func.count()).select_from(model.__table__)


def counts(url: str) -> dict[str, int]:
    with engine_for(url).connect() as conn:
        return {name: conn.execute(_count(m)).scalar_one() for name, m in TABLES.items()}
