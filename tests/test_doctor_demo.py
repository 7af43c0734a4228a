"""`doctor` on a live demo run (started here, not recorded): no finding for any healthy query,
from the history or from the state contents; the skewed query is reported for its skew only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.cli.main import main
from sparkwatch.demo import queries as dq
from tests.conftest import DEMOS
from tests.support import state_rows, wait_for
from tests.test_demo import demo_process, free_port, stop_with_ctrl_c
from tests.workloads import installed_spark_version

SKEW_CODES = {"state-partition-skew", "state-hot-key"}

SKEWED_ROWS = 250
"""State rows of ``skewed_keys`` to wait for: its join keeps about 300 once the watermark
bounds it (nine rows in ten of customer 0, 15 s kept), and its hot partition needs the
doctor's 100 rows (``MIN_ROWS``) on each side's store for both findings."""

READY_SECONDS = 300.0
"""The deadline for every query to report state and ``skewed_keys`` to hold its rows: about
20 s on a quiet machine (2026-11-29), minutes when the suite's other worker loads both cores."""

pytestmark = DEMOS


def _ready(port: int, names: set[str]) -> bool:
    rows = state_rows(f"http://127.0.0.1:{port}/metrics")
    return names <= set(rows) and rows["skewed_keys"] >= SKEWED_ROWS


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A demo stopped by Ctrl-C once every query has committed state and the skewed one holds
    enough rows: waited for, not a fixed duration a loaded machine may not reach in time."""
    root = tmp_path_factory.mktemp("demo")
    url, checkpoints = f"sqlite:///{root / 'history.db'}", root / "checkpoints"
    port = free_port()
    command = [
        sys.executable, "-m", "sparkwatch.cli.main", "demo", "--duration", str(READY_SECONDS),
        "--port", str(port), "--history-url", url, "--checkpoint-dir", str(checkpoints),
    ]
    names = {q.name for q in dq.available(installed_spark_version())}
    err_path = root / "stderr.txt"
    with err_path.open("w") as err, demo_process(command, subprocess.DEVNULL, err) as proc:
        wait_for(lambda: _ready(port, names) or proc.poll() is not None, READY_SECONDS,
                 f"state of every demo query and {SKEWED_ROWS} rows in skewed_keys",
                 every=1.0)  # a scrape of the demo's driver: not 20 a second
        assert _ready(port, names), err_path.read_text()[-3000:]
        stop_with_ctrl_c(proc, err_path)
    return url, checkpoints


@pytest.mark.spark
@pytest.mark.skipif(installed_spark_version() < (4, 0), reason="the State Data Source is 4.0+")
@pytest.mark.timeout(600)  # the set-up's demo waits up to READY_SECONDS
def test_only_the_skewed_query_has_findings_and_only_for_its_skew(
    spark: Any, demo_run: tuple[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, checkpoints = demo_run
    names = sorted(p.name for p in checkpoints.iterdir())
    assert names == sorted(q.name for q in dq.available(installed_spark_version()))
    argv = ["doctor", "--url", url, "--format", "json", "--fail-on", "info"]
    for name in names:
        argv += ["--inspect-state", str(checkpoints / name)]
    code = main(argv)
    said = capsys.readouterr()
    assert said.out, f"doctor exited {code} with no report:\n{said.err[-3000:]}"
    data = json.loads(said.out)
    assert len(data["checked"]) == len(names) and len(data["checked_state"]) == len(names)
    by_query: dict[str, set[str]] = {}
    for f in data["findings"]:
        by_query.setdefault(f["query_name"], set()).add(f["code"])
    assert set(by_query) == {"skewed_keys"}, data["findings"]
    assert by_query["skewed_keys"] == SKEW_CODES
    hot = next(f for f in data["findings"] if f["code"] == "state-hot-key")
    assert json.loads(hot["numbers"]["key"]) == {"field0": 0}
    assert code == 1
