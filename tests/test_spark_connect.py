"""In Spark Connect the JVM is out of reach: sparkwatch falls back to PySpark's public listener API
and exports the same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import CONNECT_PORT, ROOT, unavailable

pytestmark = [pytest.mark.spark, CONNECT_PORT]


def test_spark_connect_session_is_observed_through_the_public_api(sqlite_url: str) -> None:
    try:
        import pyspark
    except ImportError:
        unavailable("pyspark not installed")
    if int(pyspark.__version__.split(".")[0]) < 4:
        pytest.skip("the Connect listener runs client-side from Spark 4.0")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "tests.connect_app", sqlite_url],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["mode"] == "public"
    # One read of the session's conf, not one round trip a setting (there were 33). PySpark's
    # client asks for its own keys (plan compression) as it sends its first plan.
    ours = [c for c in out["conf_calls"]
            if c[0] != "get" or any(k.startswith(("spark.sparkwatch.", "spark.app.")) for k in c)]
    assert ours == [["get_all"]] and out["app_name"] == "connect_conf_name"
    assert out["received"]["started"] == 1 and out["received"]["terminated"] == 1
    assert out["received"]["progress"] == len(out["progress"])
    last = out["progress"][-1]["stateOperators"][0]
    values = {
        s.name: s.value
        for f in text_string_to_metric_families(out["exposition"])
        for s in f.samples
        if s.labels.get("query_id") == out["query_id"]
    }
    assert values["spark_streaming_state_rows"] == last["numRowsTotal"]
    assert values["spark_streaming_state_rows_updated_total"] == sum(
        p["stateOperators"][0]["numRowsUpdated"] for p in out["progress"]
    )
    engine = sa.create_engine(sqlite_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("select count(*) from operator_batches where run_id = :r"),
                            {"r": out["run_id"]}).scalar()
    engine.dispose()
    assert rows == len(out["progress"])
