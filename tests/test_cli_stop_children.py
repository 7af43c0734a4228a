"""``main()`` stopped by Ctrl-C inside a process that has children of its own (a notebook's Spark
JVM, a test worker's) ends what the command started and leaves the caller's children alone.
It sent SIGTERM to every child of the process: the suite's shared Spark JVM ended with exit 143
after an in-process ``db upgrade`` was interrupted, and every later Spark test on that worker
failed with "connection refused"."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sparkwatch.cli import db
from sparkwatch.cli.main import main
from tests.support import wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


@pytest.fixture()
def callers_child() -> Iterator[subprocess.Popen[bytes]]:
    child = subprocess.Popen(SLEEPER)
    yield child
    child.kill()
    child.wait()


def test_an_interrupted_command_ends_its_own_children_and_spares_the_callers(
    callers_child: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[subprocess.Popen[bytes]] = []

    def interrupted(_args: argparse.Namespace) -> int:
        started.append(subprocess.Popen(SLEEPER))  # as a Spark start cut short leaves its JVM
        raise KeyboardInterrupt

    monkeypatch.setattr(db, "run_current", interrupted)
    assert main(["db", "current", "--url", "sqlite:///unused.db"]) == 130
    [own] = started
    wait_for(lambda: own.poll() is not None, 30, "the command's own child ended")
    assert own.returncode == -15  # SIGTERM
    assert callers_child.poll() is None
