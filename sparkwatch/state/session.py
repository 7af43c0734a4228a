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
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sparkwatch.jvm import session_alone

    spark = session_alone({**STATE_CONF, "spark.master": master,
                           "spark.app.name": "sparkwatch-state"})
    # Not even ERRORs: a corrupt state file failed the read's tasks, and the executor and the
    # task's listeners logged its stack three times (150 lines) before the command's own
    # one-line reason. The reason is the output; this session is the command's own.
    spark.sparkContext.setLogLevel("OFF")
    return spark
