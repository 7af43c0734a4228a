"""The suite's ``unmeasured`` marker (tests/conftest.py, UNMEASURED): such a test runs without
coverage, in its own process (no tracer) and in the processes it starts (no coverage set-up in
their environment); the tests around it are measured as before."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import BENCHMARK_RUNS, UNMEASURED
from tests.support import COVERAGE_VARIABLES


def _coverage_environment() -> list[str]:
    return [k for k in os.environ if k.startswith(COVERAGE_VARIABLES)]


@UNMEASURED
def test_an_unmeasured_test_and_its_processes_run_without_coverage() -> None:
    assert sys.gettrace() is None
    assert _coverage_environment() == []
    child = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.gettrace())"],
        capture_output=True, text=True, timeout=60, check=True)
    assert child.stdout.strip() == "None"


def test_the_next_test_is_measured_again(request: pytest.FixtureRequest) -> None:
    if request.config.pluginmanager.getplugin("_cov") is None:
        pytest.skip("coverage is not measured in this run (a selection: scripts/test FILE)")
    from coverage import Coverage

    assert Coverage.current() is not None and sys.gettrace() is not None
    assert "COVERAGE_PROCESS_CONFIG" in _coverage_environment()


def test_every_benchmark_run_is_unmeasured(request: pytest.FixtureRequest) -> None:
    """The benchmarks' small runs drive product paths their own tests measure (conftest.py,
    BENCHMARK_RUNS): each of their tests carries the marker."""
    bench = [item for item in request.session.items if item.nodeid.startswith(BENCHMARK_RUNS)]
    if not bench:
        pytest.skip("no benchmark run in this selection")
    assert [i.nodeid for i in bench if i.get_closest_marker("unmeasured") is None] == []
