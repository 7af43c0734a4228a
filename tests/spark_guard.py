"""Who stopped the suite's shared SparkContext, and when (tests/conftest.py, the ``spark``
fixture).

A CI run once lost its worker's shared session in the middle of the run: every later Spark test
of that worker failed with "Cannot call methods on a stopped SparkContext", and nothing said what
had stopped it (an in-process ``sparkwatch state`` had taken the session for its own and stopped
it, sparkwatch/cli/state.py). Here every Python call that stops the shared context is recorded
with its stack and the test it ran in; the test during which the context stopped fails at its
tear-down with that record, and each later test that asks for the session fails at once with it
rather than with a Py4J error. A stop that did not come from Python (Spark's own: an error of its
scheduler, a shutdown hook) has its JVM stack (Spark keeps where it was stopped) and the shared
JVM's driver log (:data:`DRIVER_LOG_CONFIG`).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DRIVER_LOG_CONFIG = Path(__file__).resolve().parent / "spark-conf" / "driver-log4j2.properties"
"""Log4j2's configuration of the shared session's JVM only (not named ``log4j2.properties``, which
every JVM of the suite would find on its class path through ``SPARK_CONF_DIR``)."""
DRIVER_LOG_PROPERTY = "sparkwatch.test.driverLog"
"""The JVM system property :data:`DRIVER_LOG_CONFIG` reads its file's path from."""
LOG_TAIL_LINES = 40


def driver_log_conf(log: Path) -> dict[str, str]:
    """Spark conf that gives the shared session's JVM its driver log at ``log``. The default
    JVM options, not the extra ones: tests/spark-conf/spark-defaults.conf sets those for every
    JVM, and a builder's value would replace the file's."""
    # Quoted: Spark splits the options as a shell would, and a checkout's path may hold spaces.
    return {"spark.driver.defaultJavaOptions":
            f'"-Dlog4j2.configurationFile=file:{DRIVER_LOG_CONFIG}" '
            f'"-D{DRIVER_LOG_PROPERTY}={log}"'}


@dataclass(frozen=True)
class Stop:
    """A Python call that stopped the shared context."""

    test: str
    at: float
    thread: str
    stack: str

    def describe(self) -> str:
        when = time.strftime("%H:%M:%S", time.localtime(self.at))
        return (f"stopped at {when} during {self.test} (thread {self.thread}), "
                f"from:\n{self.stack}")


class SharedSparkGuard:
    """Records the stops of one session's SparkContext (``SparkContext.stop``, through which
    ``SparkSession.stop`` goes too) but the fixture's own, and tells whether it still runs."""

    def __init__(self, session: Any, driver_log: Path, current_test: Callable[[], str]) -> None:
        self.session = session
        self.driver_log = driver_log
        self.current_test = current_test
        self.stops: list[Stop] = []
        self.reported = False
        self._releasing = False
        self._context = session.sparkContext
        from pyspark import SparkContext

        self._original = SparkContext.__dict__["stop"]
        SparkContext.stop = self._recording_stop(self._original)  # type: ignore[method-assign]

    def _recording_stop(self, original: Any) -> Any:
        guard = self

        def stop(context: Any, *args: Any, **kwargs: Any) -> Any:
            if context is guard._context and not guard._releasing and not guard.stops:
                guard.stops.append(Stop(guard.current_test(), time.time(),
                                        threading.current_thread().name,
                                        "".join(traceback.format_stack()[:-1])))
            return original(context, *args, **kwargs)

        return stop

    def release(self) -> None:
        """The fixture's own stop, at the end of the run; ``SparkContext.stop`` put back."""
        from pyspark import SparkContext

        self._releasing = True
        try:
            self.session.stop()
        finally:
            SparkContext.stop = self._original  # type: ignore[method-assign]

    def stopped(self) -> bool:
        if self.stops or self._context._jsc is None:
            return True
        try:
            return bool(self._context._jsc.sc().isStopped())
        except Exception:  # noqa: BLE001 - the JVM itself is gone: stopped too
            return True

    def how(self) -> str:
        """How the context stopped, for a test's failure: the Python stack of the call, else the
        JVM's own account; the driver log's last lines either way. Once told, in short."""
        if self.reported:
            during = self.stops[0].test if self.stops else "an earlier test"
            return (f"the suite's shared SparkContext was stopped during {during}: see the error "
                    f"at the tear-down of the test it stopped in (driver log {self.driver_log})")
        said = (self.stops[0].describe() if self.stops
                else f"not by a Python call; noticed in {self.current_test()}\n"
                     f"{self._jvm_account()}")
        return (f"the suite's shared SparkContext is stopped: {said}\n"
                f"{self._log_tail()}")

    def _jvm_account(self) -> str:
        """Spark's own error for a stopped context, which says where it was stopped."""
        try:
            self._context._jsc.sc().assertNotStopped()
        except Exception as exc:  # noqa: BLE001 - the account is the error's text
            return f"the JVM says: {exc}"
        return "the JVM says it runs"

    def _log_tail(self) -> str:
        if not self.driver_log.exists():
            return (f"no driver log at {self.driver_log} (its JVM started before the fixture, "
                    "without the fixture's options)")
        lines = self.driver_log.read_text(errors="replace").splitlines()
        tail = "\n".join(lines[-LOG_TAIL_LINES:])
        return f"driver log {self.driver_log}, last {LOG_TAIL_LINES} lines:\n{tail}"
