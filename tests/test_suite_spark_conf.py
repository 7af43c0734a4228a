"""The suite's own Spark: every JVM it starts runs with the demo's low-CPU JVM options, read from
``tests/spark-conf`` (tests/conftest.py sets ``SPARK_CONF_DIR``)."""

from __future__ import annotations

from typing import Any

import pytest

from sparkwatch.demo.session import DEMO_CONF

JAVA_OPTIONS = "spark.driver.extraJavaOptions"


@pytest.mark.spark
def test_the_shared_session_runs_with_the_demos_jvm_options(spark: Any) -> None:
    # Spark 4 puts its own module options first (--add-opens ...), ours come last.
    assert spark.sparkContext.getConf().get(JAVA_OPTIONS).endswith(DEMO_CONF[JAVA_OPTIONS])
    flags = spark.sparkContext._jvm.java.lang.management.ManagementFactory \
        .getRuntimeMXBean().getInputArguments().toString()
    assert set(DEMO_CONF[JAVA_OPTIONS].split()) <= set(flags.strip("[]").split(", ")), flags
