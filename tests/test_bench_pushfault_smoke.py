"""The push-fault benchmark keeps working: a short real run (its own local Spark session, a
silent server, a 503 gate in front of a real collector) that measures each run's batches and
delivers every event the listener received once the gate opens.

Batch-duration ratios are not judged here (timed figures live in docs/benchmarks.md)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


@pytest.mark.timeout(300)
def test_every_run_is_measured_and_the_gated_events_are_all_delivered() -> None:
    result = subprocess.run([sys.executable, "-m", "bench", "pushfault", "--seconds", "5"],
                            capture_output=True, text=True, timeout=280)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[0] for r in rows] == [
        "| no push sink", "| collector accepts and never answers",
        "| collector answers 503 for 5 s"]
    assert all(int(r.split(" | ")[1]) > 0 for r in rows), rows
    delivered = re.search(r"\| (\d+) of (\d+) \|$", rows[-1])
    assert delivered is not None and delivered.group(1) == delivered.group(2), rows[-1]
