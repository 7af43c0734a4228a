"""Helpers shared by tests: waiting on conditions, throwaway PostgreSQL databases, the CLI run
in-process."""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from sparkwatch.cli.main import main

SPARK_OPERATOR_NUMBERS = {
    "numRowsTotal": "num_rows_total",
    "numRowsUpdated": "num_rows_updated",
    "allUpdatesTimeMs": "all_updates_time_ms",
    "numRowsRemoved": "num_rows_removed",
    "allRemovalsTimeMs": "all_removals_time_ms",
    "commitTimeMs": "commit_time_ms",
    "memoryUsedBytes": "memory_used_bytes",
    "numRowsDroppedByWatermark": "num_rows_dropped_by_watermark",
    "numShufflePartitions": "num_shuffle_partitions",
    "numStateStoreInstances": "num_state_store_instances",
}
"""StateOperatorProgress's numeric keys and the attribute (and history column) each becomes,
spelled out here apart from sparkwatch/model/fields.py so that the tests check the table."""


def wait_for(condition: Callable[[], bool], timeout: float, what: str, *,
             every: float = 0.05) -> None:
    """Poll ``condition`` every ``every`` seconds until true; fail naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)



COVERAGE_VARIABLES = ("COVERAGE_", "COV_CORE_")
"""Prefixes of the environment variables through which coverage measures the processes a test
starts (``COVERAGE_PROCESS_CONFIG``, set by pyproject's ``patch = ["subprocess"]``)."""


def unmeasured(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the suite's subprocess coverage. Coverage installs its own SIGTERM handler
    as the interpreter starts (pyproject's ``sigterm = true``): a test of what a process does
    with a signal from its very start, or of an app with no handler of its own, must not have
    it."""
    return {k: v for k, v in env.items() if not k.startswith(COVERAGE_VARIABLES)}


def create_database(admin_url: str) -> str:
    import sqlalchemy as sa

    # The pytest-xdist worker's id (gw0, gw1) in the name: whose leftover a database is.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    name = f"sparkwatch_test_{worker}_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return name


def drop_database(admin_url: str, name: str) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``sparkwatch *argv`` in this process: its exit code, stdout and stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"",
                  every: float = 0.25) -> float:
    """Seconds until the server closes ``sock`` (or answers it 408), sending ``trickle`` a byte
    every ``every`` seconds; fails past ``seconds``."""
    start = time.monotonic()
    sock.settimeout(every)
    sent = 0
    while time.monotonic() - start < seconds:
        if sent < len(trickle):
            try:
                sock.send(trickle[sent:sent + 1])
            except OSError:
                return time.monotonic() - start
            sent += 1
        try:
            data = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - start
        if data == b"" or b"408" in data:
            return time.monotonic() - start
    raise AssertionError(f"connection still open after {seconds} s")


def state_series(metrics_url: str) -> list[tuple[dict[str, str], float]]:
    """The state-rows series on a /metrics (labels, value); empty while nothing serves."""
    # urllib, not httpx: tests/conftest.py imports this module in the PySpark 3.5 virtualenv too
    # (scripts/test), which has no httpx.
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(metrics_url, timeout=5) as response:
            text = response.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return []
    return [(sample.labels, sample.value)
            for family in text_string_to_metric_families(text)
            if family.name == "spark_streaming_state_rows" for sample in family.samples]


def state_rows(metrics_url: str) -> dict[str, float]:
    """Query name -> its state rows (all operators) on a /metrics; empty while nothing serves."""
    rows: dict[str, float] = {}
    for labels, value in state_series(metrics_url):
        rows[labels["query_name"]] = rows.get(labels["query_name"], 0.0) + value
    return rows


def _process_tree() -> dict[int, list[int]]:
    """Parent pid -> its children's pids, of every process (Linux /proc)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z":  # a zombie has ended; only its parent's wait is missing
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _is_collector(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # `python -m sparkwatch.cli.main collector ...` (the tests'), `sparkwatch collector ...`
    sparkwatch = any(a == b"sparkwatch.cli.main" or a.endswith(b"sparkwatch") for a in argv)
    return sparkwatch and b"collector" in argv


def collector_children() -> frozenset[int]:
    """This process's children that are ``sparkwatch collector`` processes, still running."""
    return frozenset(pid for pid in _process_tree().get(os.getpid(), []) if _is_collector(pid))


def end_process_trees(pids: frozenset[int], grace: float = 10.0) -> None:
    """SIGTERM ``pids`` and every process under them; SIGKILL what is left after ``grace``
    seconds."""
    tree = _process_tree()
    pending, everyone = list(pids), []
    while pending:
        pid = pending.pop()
        everyone.append(pid)
        pending.extend(tree.get(pid, []))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in everyone:
            with suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pid) for pid in everyone):
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


class SettableClock:
    """A clock a test sets (``clock.now = ...``) instead of sleeping: for MetricState's eviction,
    the tenants' and the demo's timing."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@contextmanager
def session_holding(url: str, statement: str) -> Iterator[None]:
    """Another session that ran ``statement`` and keeps its transaction open for the block,
    holding the locks it took: a read's ACCESS SHARE (as a long dashboard query or ``pg_dump``
    holds it), or an explicit ``LOCK TABLE``."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(statement))
            yield
            conn.rollback()
    finally:
        engine.dispose()
