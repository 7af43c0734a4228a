"""Shared fixtures: one real local Spark session per run, fresh PostgreSQL databases, samples.

With CI=true a test whose real dependency (Spark, PostgreSQL, promtool) is missing fails instead
of skipping.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.local import local_spark
from tests.support import create_database, drop_database

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_ADMIN_URL = os.environ.get(
    "SPARKWATCH_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def unavailable(reason: str) -> None:
    """Skip locally, fail in CI: CI must run every test against real parts."""
    if IN_CI:
        pytest.fail(f"required in CI but unavailable: {reason}")
    pytest.skip(reason)


def load_fixture(relative: str) -> dict[str, Any]:
    return json.loads((FIXTURES / relative).read_text())


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        unavailable("promtool not installed (apt-get install prometheus)")
    return str(path)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local Spark session for the whole run (a session costs 5-9 s to start)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        unavailable("pyspark not installed")
    session = local_spark("sparkwatch-tests",
                          {"spark.sql.streaming.noDataMicroBatches.enabled": "true"},
                          log_level="WARN")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(PG_ADMIN_URL)
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means "no PostgreSQL here"
        unavailable(f"PostgreSQL not reachable at {PG_ADMIN_URL}: {exc}")
    return PG_ADMIN_URL


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped afterwards."""
    import sqlalchemy as sa

    name = create_database(pg_admin_url)
    url = sa.engine.make_url(pg_admin_url).set(database=name)
    yield url.render_as_string(hide_password=False)
    drop_database(pg_admin_url, name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest) -> str:
    """Runs a test once on SQLite and once on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))
