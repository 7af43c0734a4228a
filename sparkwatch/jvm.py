"""Start the JVM of the Spark sessions our commands own (the demo's, ``state``'s) in a process
session of its own, so that a signal to the command's process group reaches the command only.

A SIGTERM sent to a whole group (``timeout``, ``kill -- -PGID``, a service manager stopping the
group it started) used to reach PySpark's JVM too: it ended at once and took the queries with it,
the demo's final table showed them failed ("SparkContext was shut down"), and the command's own
orderly stop then met a dead gateway and traced back. PySpark keeps only Ctrl-C's SIGINT out of
its JVM. Alone in its session, the JVM hears no signal of the group and is stopped by the command,
in order; it still never outlives the command: it exits at its stdin's end of file, which comes
however the command ends, SIGKILL included.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def launch_alone(conf: Mapping[str, str]) -> None:
    """Start PySpark's gateway JVM with ``conf`` in a session of its own, where none runs yet in
    this process; a session builder started afterwards uses it. ``conf`` is the builder's: what
    only takes effect at launch (driver memory, JVM options) must be given here. A process that
    already has a gateway (Spark started before, by the user or a test) keeps it."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:
        if SparkContext._gateway is not None:
            return
        spark_conf = SparkConf().setAll(list(conf.items()))
        gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True})
        SparkContext._ensure_initialized(gateway=gateway)


def session_alone(conf: Mapping[str, str]) -> SparkSession:
    """A session built with ``conf`` on a JVM of its own (:func:`launch_alone`), quiet but for
    errors: our commands' own output owns the terminal, and Spark's WARNs would tear it."""
    from pyspark.sql import SparkSession

    launch_alone(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = keeping_sigint_handler(builder.getOrCreate)
    session.sparkContext.setLogLevel("ERROR")
    return session


def keeping_sigint_handler(build: Callable[[], SparkSession]) -> SparkSession:
    """``build()``, with the command's own SIGINT handler kept: the SparkContext installs one of
    PySpark's that cancels the jobs through Py4J from inside the Py4J call Ctrl-C interrupted (a
    reentrant read that fails and logs its stack) and then raises a plain KeyboardInterrupt. The
    command's stop cancels the jobs anyway. Put back afterwards, it would still hold for the rest
    of the session's start, so it is never let in."""
    if threading.current_thread() is not threading.main_thread():
        return build()
    install = signal.signal

    def keep_sigint(signum: int, handler: Any) -> Any:
        return signal.getsignal(signum) if signum == signal.SIGINT else install(signum, handler)

    signal.signal = keep_sigint  # type: ignore[assignment]
    try:
        return build()
    finally:
        signal.signal = install
