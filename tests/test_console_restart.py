"""A driver restarted on the same history shows the earlier run's points: the first driver is a
process of its own (its own JVM) that writes the history and exits; the second, a new listener on
the suite's Spark session, has never seen the query and serves its page from the history."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import sparkwatch
from tests.conftest import ROOT


@pytest.mark.spark
def test_a_restarted_driver_shows_the_earlier_runs_points(spark: Any, tmp_path: Path) -> None:
    history_url = f"sqlite:///{tmp_path / 'history.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "tests.console_driver", "restarted", str(tmp_path / "chk"),
         "history", history_url],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    first = json.loads(done.stdout.strip().splitlines()[-1])
    assert first["flushed"] and first["batches"] >= 3, first

    att = sparkwatch.attach(spark, metrics_port=0, history_url=history_url)
    try:
        assert att.state.query(att.app.id, first["query_id"]) is None  # memory starts empty
        url = (f"http://127.0.0.1:{att.metrics_port}/queries/{first['query_id']}"
               "?refresh=0&range=all")
        with urllib.request.urlopen(url, timeout=30) as response:
            page = response.read().decode()
    finally:
        att.detach()
    assert "restarted_dedupe" in page and first["run_id"] in page  # the query and its run
    chart = page[page.index('id="op-0-rows"'):]
    points = int(re.search(r'data-points="(\d+)"', chart).group(1))  # type: ignore[union-attr]
    assert points >= first["batches"], (points, first)
