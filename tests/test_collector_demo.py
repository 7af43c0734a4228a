"""``sparkwatch demo --collector``: the demo's queries push to a local collector process, whose
/metrics shows them (with app labels) and which writes the history."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sparkwatch.collector.config import DEFAULT_PORT
from tests.conftest import DEMOS
from tests.support import wait_for
from tests.test_collector_support import samples, scalar

pytestmark = [pytest.mark.spark, DEMOS]


def collector_series() -> list[dict[str, str]]:
    try:
        text = httpx.get(f"http://127.0.0.1:{DEFAULT_PORT}/metrics", timeout=2).text
    except httpx.HTTPError:
        return []
    return [labels for labels, _ in samples(text, "spark_streaming_state_rows")]


def test_demo_pushes_to_a_local_collector(tmp_path: Path) -> None:
    history = tmp_path / "history.db"
    command = [sys.executable, "-m", "sparkwatch.cli.main", "demo", "--collector",
               "--duration", "120", "--port", "0", "--rows-per-second", "5",
               "--history-url", f"sqlite:///{history}"]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(tmp_path / "out", "w") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                cwd=tmp_path)
        try:
            wait_for(lambda: len({s["query_name"] for s in collector_series()}) >= 3, 90,
                     "state series of three demo queries on the collector's /metrics")
            labels = collector_series()[0]
            assert labels["app_name"] and labels["app_id"]
            proc.send_signal(signal.SIGTERM)  # the demo's own clean stop, as on Ctrl-C
            # 143: stopped by SIGTERM, cleanly (sparkwatch/cli/signals.py)
            assert proc.wait(120) == 143, (tmp_path / "out").read_text()[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    output = (tmp_path / "out").read_text()
    assert f"collector: http://127.0.0.1:{DEFAULT_PORT}/metrics" in output
    url = f"sqlite:///{history}"
    assert int(scalar(url, "select count(distinct query_id) from operator_batches")) >= 3
    assert collector_series() == [], "the collector stops with the demo"
