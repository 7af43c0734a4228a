"""The local Spark session `sparkwatch state` reads with: small, quiet, bounded driver memory."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STATE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    # Only aggregates reach the driver; 1 GiB bounds it whatever the state's size.
    "spark.driver.memory": "1g",
    # The aggregations group a few keys per partition: a handful of shuffle partitions do.
    "spark.sql.shuffle.partitions": "8",
}


def build_session(master: str = "local[*]") -> SparkSession:
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sparkwatch.jvm import launch_alone

    conf = {**STATE_CONF, "spark.master": master, "spark.app.name": "sparkwatch-state"}
    launch_alone(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
