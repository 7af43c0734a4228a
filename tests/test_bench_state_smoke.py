"""The state benchmark keeps working: a tiny real run (2,000 state rows) builds its checkpoint,
inspects it with `sparkwatch state` and records its block. Timing is judged in docs/benchmarks.md,
not here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.record import markers
from tests.conftest import ROOT
from tests.workloads import installed_spark_version


@pytest.mark.spark
@pytest.mark.skipif(installed_spark_version() < (4, 0), reason="the State Data Source is 4.0+")
@pytest.mark.timeout(300)
def test_a_small_run_reports_every_row_and_records_its_block(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    # Its own process: the benchmark starts and stops Spark sessions of its own.
    done = subprocess.run(
        [sys.executable, "-m", "bench", "state", "--rows", "2000", "--partitions", "2", "--record"],
        capture_output=True, text=True, cwd=ROOT, timeout=280,
        env={**os.environ, "SPARKWATCH_BENCH_DOC": str(doc), "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    begin, end = markers("state")
    block = doc.read_text().split(begin, 1)[1].split(end, 1)[0]
    assert "2,000 state rows in 2 partitions" in block
    assert "rows reported 2,000 = the query's numRowsTotal" in block
    assert "goal < 60 s: met" in block
