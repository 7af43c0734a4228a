"""Shared fixtures: one real local Spark session per run, fresh PostgreSQL databases, samples.

With CI=true a test whose real dependency (Spark, PostgreSQL, promtool) is missing fails instead
of skipping.

Secrets are never shown: the suite's database URLs carry :data:`CANARY_PASSWORD` (PostgreSQL here
trusts local connections, so the password is sent and ignored) and its tokens carry
:data:`CANARY_TOKEN`; after every test, its captured log records, stdout and stderr (and what it
read through capsys/capfd) must hold neither (:func:`_secrets_never_shown`).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bench.local import local_spark
from tests.spark_guard import SharedSparkGuard, driver_log_conf
from tests.support import (
    COVERAGE_VARIABLES,
    collector_children,
    create_database,
    drop_database,
    end_process_trees,
)

if TYPE_CHECKING:
    from tests.test_collector_support import PrivatePostgres

pytest_plugins = ("pytester",)  # tests of the suite's own checks

# A suite started as a script's background job (``nohup scripts/test &``) inherits SIGINT ignored,
# and so would every command it starts, which keep an ignored SIGINT ignored as a background job
# must (sparkwatch.interrupts.IGNORABLE): the Ctrl-C tests need it handled. Python's handler
# here; the programs the tests start get the default action back at exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CANARY_PASSWORD = "canary-pw-Q7x2"
CANARY_TOKEN = "canary-token-Zk93"
CANARIES = (CANARY_PASSWORD, CANARY_TOKEN)
DEMOS = pytest.mark.xdist_group("demos")
"""Tests running the demo (nine queries, the heaviest load of the suite; some bind its fixed
ports, the README's 9750 and the collector's 9751): under pytest-xdist (scripts/test) they run
one after another on one worker."""
CONNECT_PORT = pytest.mark.xdist_group("spark-connect-15002")
"""Tests starting a local Spark Connect server, which listens on Spark's fixed port 15002."""
UNMEASURED = pytest.mark.unmeasured
"""A test that runs without coverage measurement, in its own process and in every process it
starts (:func:`pytest_runtest_protocol`): a volume test, whose thousands of events repeat paths
that other tests measure, under a tracer that makes them 2-3x slower (the fault suite 110 s
-> 268 s, the query flood 20 s -> 75 s), or a test of a copy of the code (a fresh clone in its
own virtualenv), whose lines are not the ones the report is about."""
BENCHMARK_RUNS = "tests/test_bench"
"""The modules of the benchmarks' small runs, all :data:`UNMEASURED`: bench/ is outside the coverage
report, and the product paths a benchmark drives in a loop are measured by their own tests. Traced,
they took twice as long (tests/test_bench_ingest_smoke.py 28 s, untraced 15 s)."""
SHOWS_CANARIES = "shows_canaries"
"""The marker of a test that shows canaries on purpose (the test of this check itself)."""
SPARK_CONF_DIR = Path(__file__).resolve().parent / "spark-conf"
"""Spark's defaults for the suite's JVMs (the shared session, and through the environment every
Spark the tests start: demos, ``sparkwatch run``, state reads, Spark Connect): the demo's
low-CPU JVM options; a developer's own ``SPARK_CONF_DIR`` wins."""
os.environ.setdefault("SPARK_CONF_DIR", str(SPARK_CONF_DIR))
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


SPARK_GUARD = pytest.StashKey[SharedSparkGuard]()
CURRENT_TEST = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[Any]:
    """One local Spark session for the whole run (a session costs 5-9 s to start), with a
    driver log of its own under the worker's basetemp and a guard that names whatever stops it
    before the run ends (:func:`_shared_spark_running`)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        unavailable("pyspark not installed")
    log = tmp_path_factory.getbasetemp() / "spark-driver.log"
    session = local_spark("sparkwatch-tests",
                          {"spark.sql.streaming.noDataMicroBatches.enabled": "true",
                           **driver_log_conf(log)},
                          log_level="WARN")
    stash = request.config.stash
    guard = SharedSparkGuard(session, log, lambda: stash.get(CURRENT_TEST, "(no test yet)"))
    stash[SPARK_GUARD] = guard
    yield session
    del stash[SPARK_GUARD]
    guard.release()


@pytest.fixture(autouse=True)
def _shared_spark_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test during which the shared SparkContext stopped fails at its tear-down, saying how
    (tests/spark_guard.py); a later test that needs the session fails at once, saying the same,
    instead of with a Py4J error of its own."""
    stash = request.config.stash
    stash[CURRENT_TEST] = request.node.nodeid
    guard = stash.get(SPARK_GUARD, None)
    if guard is not None and "spark" in request.fixturenames and guard.stopped():
        pytest.fail(guard.how(), pytrace=False)
    yield
    guard = stash.get(SPARK_GUARD, None)
    if guard is not None and not guard.reported and guard.stopped():
        how = guard.how()
        guard.reported = True  # told in full once; later tests fail at their set-up, in short
        pytest.fail(f"the shared SparkContext stopped by the end of this test; {how}",
                    pytrace=False)


@pytest.fixture(scope="module", autouse=True)
def _no_collector_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module whose tests leave a ``sparkwatch collector`` of theirs running (a test that
    failed before its own clean-up) fails at its end, and the collector is ended: one was found
    still running after a CI run, its jobs knocking at a dropped database. After the module's
    own fixtures, which may hold a collector for all its tests."""
    before = collector_children()
    yield
    left = collector_children() - before
    if left:
        end_process_trees(left)
        pytest.fail(f"{request.node.nodeid} left sparkwatch collector processes running "
                    f"(pids {sorted(left)}; ended now)", pytrace=False)


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
    # The canary password: the server trusts local connections, so only a leak would show it.
    url = sa.engine.make_url(pg_admin_url).set(database=name, password=CANARY_PASSWORD)
    yield url.render_as_string(hide_password=False)
    drop_database(pg_admin_url, name)


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of the module's own, which its tests may stop and start."""
    from tests.test_collector_support import private_postgres  # that module imports this one

    with private_postgres() as pg:
        yield pg


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest) -> str:
    """Runs a test once on SQLite and once on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Set-up, call and tear-down of an :data:`UNMEASURED` test without coverage."""
    if item.get_closest_marker("unmeasured") is None:
        yield
        return
    with coverage_paused():
        yield


@contextmanager
def coverage_paused() -> Iterator[None]:
    """Every coverage measurement of this process stopped, and coverage's subprocess set-up (an
    environment variable every Python process it starts reads) out of the environment. Every:
    a pytest-xdist worker is itself such a process, so it has coverage's own measurement started
    with the interpreter under pytest-cov's, and stopping the latter resumes the former."""
    saved = {k: os.environ.pop(k) for k in list(os.environ)
             if k.startswith(COVERAGE_VARIABLES)}
    stopped = _stop_coverage()
    try:
        yield
    finally:
        os.environ.update(saved)
        for cov in reversed(stopped):  # in the order they had started: the last one on top
            cov.start()


def _stop_coverage() -> list[Any]:
    """Every coverage measurement of this process stopped, the last started first."""
    try:
        from coverage import Coverage
    except ImportError:  # a virtualenv without coverage (the PySpark 3.5 pass)
        return []
    stopped = []
    while (running := Coverage.current()) is not None:
        running.stop()
        stopped.append(running)
    return stopped


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist's loadgroup (scripts/test) a test without a group of its own runs on
    its module's worker: module-scoped set-ups (a benchmark run, a collector, a browser, running
    queries) happen once, as in a run on one process. The benchmarks' runs are unmeasured."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
        if item.nodeid.startswith(BENCHMARK_RUNS):
            item.add_marker(UNMEASURED)


def shown_canaries(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


@pytest.fixture(autouse=True)
def _secrets_never_shown(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[None]:
    """Fails a test whose logs, or output it read through capsys/capfd, show a canary secret.
    (Output it did not read is checked in :func:`pytest_runtest_makereport`.)"""
    if request.node.get_closest_marker(SHOWS_CANARIES):
        yield
        return
    caplog.set_level(logging.INFO, logger="sparkwatch")
    read: list[str] = []
    original = pytest.CaptureFixture.readouterr

    def readouterr(self: Any) -> Any:
        result = original(self)
        read.extend(str(part) for part in result)
        return result

    monkeypatch.setattr(pytest.CaptureFixture, "readouterr", readouterr)
    yield
    logged = "\n".join(r.getMessage() + (caplog.handler.format(r) if r.exc_info else "")
                       for when in ("setup", "call") for r in caplog.get_records(when))
    leaked = shown_canaries(logged + "\n".join(read))
    assert not leaked, f"a canary secret was shown in this test's logs or output: {leaked}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Captured stdout, stderr and log sections of every phase must not show a canary secret."""
    outcome = yield
    report = outcome.get_result()
    if item.get_closest_marker(SHOWS_CANARIES):
        return
    # Sections accumulate over the phases: judge each phase by its own ("Captured log call").
    leaked = {title for title, text in report.sections
              if title.endswith(" " + report.when) and shown_canaries(text)}
    if leaked and report.outcome != "failed":
        report.outcome = "failed"
        report.longrepr = f"a canary secret was shown in {sorted(leaked)}"


@pytest.fixture()
def console(history_db: str) -> Iterator[Any]:
    """The history console on the requesting module's ``history_db``."""
    from sparkwatch.console.app import Console
    from sparkwatch.console.history import HistoryData

    data = HistoryData(history_db)
    yield Console(data, lambda _tenant: [])
    data.close()
