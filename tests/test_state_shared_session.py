"""``sparkwatch state`` and ``doctor --inspect-state`` run inside a process that already runs
Spark (a notebook, a test worker) read with its session and leave it running, whichever thread
calls them. They took "already runs Spark" from ``getActiveSession()``, which is the calling
thread's: from another thread, or from the same one once an interrupted Py4J call had given it a
new connection (a new JVM thread), it said none, the builder handed back the caller's session
anyway, and the read stopped it. In CI that was the suite's shared session: every later Spark test
of that worker failed with "Cannot call methods on a stopped SparkContext"."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.cli.main import main
from tests.workloads import installed_spark_version

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(installed_spark_version() < (4, 0), reason="the State Data Source is 4.0+"),
]

COMMANDS = [["state"], ["doctor", "--inspect-state"]]
REFUSED = {"state": 2, "doctor": 1}
"""How each ends on a path without a checkpoint: state refuses it, doctor reports it unreadable
(a ``state-unreadable`` error finding) beside the checkpoints it could read."""


def running(spark: Any) -> bool:
    context = spark.sparkContext
    return context._jsc is not None and not context._jsc.sc().isStopped()


def read_missing(command: list[str], tmp_path: Path) -> int:
    """A read of a path without a checkpoint: it gets its session before it finds out."""
    return main([*command, str(tmp_path / "missing"), "--format", "json"])


@pytest.fixture
def no_active_session_here(spark: Any) -> Iterator[None]:
    """This thread's JVM thread without an active session: what an interrupted Py4J call leaves
    (its connection closed, the next call gets a new JVM thread)."""
    from pyspark.sql import SparkSession

    sessions = SparkSession._get_j_spark_session_class(spark._jvm)
    sessions.clearActiveSession()
    assert SparkSession.getActiveSession() is None
    yield
    sessions.setActiveSession(spark._jsparkSession)


@pytest.mark.parametrize("command", COMMANDS, ids=["state", "doctor"])
def test_a_read_from_another_thread_leaves_the_callers_session_running(
    spark: Any, tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    said: dict[str, int] = {}
    thread = threading.Thread(target=lambda: said.update(code=read_missing(command, tmp_path)))
    thread.start()
    thread.join(120)
    assert said.get("code") == REFUSED[command[0]], capsys.readouterr().err
    assert running(spark)


@pytest.mark.parametrize("command", COMMANDS, ids=["state", "doctor"])
def test_a_read_on_a_thread_without_an_active_session_leaves_the_callers_session_running(
    spark: Any, tmp_path: Path, command: list[str], no_active_session_here: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert read_missing(command, tmp_path) == REFUSED[command[0]], capsys.readouterr().err
    assert running(spark)
