"""Local resources that the benchmarks, the tests and the scripts all need: free ports and a
local Spark session.

One place, so that every harness starts Spark the same way (two cores, two shuffle partitions,
no UI, bound to loopback: what the tests and the benchmark figures assume).
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

LOCAL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
}


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the caller binds it soon after; a race we accept)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def local_spark(app_name: str, conf: Mapping[str, str] | None = None,
                log_level: str = "ERROR") -> Any:
    """``local[2]`` SparkSession with :data:`LOCAL_CONF` plus ``conf``; Python workers run this
    interpreter (the one that has pandas and pyarrow)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session
