"""SIGTERM and Ctrl-C stop every long-running command cleanly, at any moment: while it starts (as
soon as its handlers are in place, before Spark or uvicorn is up), while it runs, and when a second
signal comes while it is already stopping. The convention (sparkwatch/cli/signals.py): exit status
128 + the signal (130 after SIGINT, 143 after SIGTERM), no traceback, no Python or JVM stack on
stderr, no child process left behind, and for the demo no run left "running" in its history.

Real processes, each started in a session of its own: SIGINT goes to the whole process group, as a
terminal's Ctrl-C does (Spark's JVM and the collector's history writer get it too), SIGTERM to the
process alone, as `kill` and Kubernetes send it. Children are found by a marker in their
environment, which every descendant inherits, so that one reparented to init is still found.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pexpect
import pytest

from bench.local import free_port
from sparkwatch.demo.runner import STOP_BOUND_SECONDS
from sparkwatch.terminal import SHOW_CURSOR
from tests.conftest import DEMOS
from tests.support import unmeasured, wait_for
from tests.test_collector_support import run_events
from tests.top_terminal import FRAME_END
from tests.top_terminal import spawn as spawn_top

MARK = "SPARKWATCH_SIGNAL_TEST"
SIGNALS = [signal.SIGTERM, signal.SIGINT]
EXIT_SECONDS = 30.0  # a command's stop: a few steps of at most 10 s, usually ~5 s
# The demo's stop is bounded by its own steps (usually ~5 s, longer when every query overran its
# trigger and waits for a gap between batches), then Spark's stop.
DEMO_EXIT_SECONDS = STOP_BOUND_SECONDS + 20.0
CHILDREN_GONE_SECONDS = 20.0  # a JVM whose driver died ends on its stdin's end of file
NOISE = ("Traceback", "KeyboardInterrupt", "py4j", "\tat ", "Exception in thread")


def status(sig: signal.Signals) -> int:
    return 128 + int(sig)


@dataclass
class Command:
    """``sparkwatch ARGS`` as a real process in a session of its own."""

    proc: subprocess.Popen[bytes]
    marker: str
    out: Path
    err: Path

    def send(self, sig: signal.Signals, *, group: bool = False) -> None:
        """``group``: to the whole process group, as ``timeout`` or ``kill -- -PGID`` send."""
        if sig == signal.SIGINT or group:
            os.killpg(self.proc.pid, sig)  # Ctrl-C: the terminal signals the foreground group
        else:
            self.proc.send_signal(sig)

    def marked(self) -> set[int]:
        """This process and every descendant still alive (zombies are dead)."""
        return {pid for pid in _pids() if _has_marker(pid, self.marker) and not _zombie(pid)}

    def handlers_installed(self) -> bool:
        return handlers_installed(self.proc.pid)

    def ends_cleanly(self, sig: signal.Signals, within: float = EXIT_SECONDS) -> str:
        """Asserts the clean end, ``within`` seconds, of a stop asked for by ``sig``; returns
        stderr."""
        try:
            code = self.proc.wait(within)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running {within:g}s after {sig.name}:\n"
                                 + self.err.read_text()[-3000:]) from None
        err = self.err.read_text(errors="replace")
        assert code == status(sig), f"exit {code} after {sig.name}, stderr:\n{err[-3000:]}"
        noise = [word for word in NOISE if word in err]
        assert not noise, f"{noise} on stderr after {sig.name}:\n{err[-3000:]}"
        wait_for(lambda: not self.marked(), CHILDREN_GONE_SECONDS,
                 f"no child of the stopped process left ({self.describe_marked()})")
        return err

    def describe_marked(self) -> str:
        return ", ".join(f"{pid}: {_cmdline(pid)[:80]}" for pid in sorted(self.marked()))

    def stop(self) -> None:
        for pid in self.marked():
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(10)


def handlers_installed(pid: int) -> bool:
    """Both signals are caught: sparkwatch's main() runs (Python alone catches only SIGINT)."""
    try:
        status_text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line.split()[1] for line in status_text.splitlines()
                      if line.startswith("SigCgt:")), 16)
    return all(caught & (1 << (int(sig) - 1)) for sig in SIGNALS)


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _has_marker(pid: int, marker: str) -> bool:
    try:
        return f"{MARK}={marker}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


def ignoring_sigint() -> None:
    """As a shell starts a script's background job (``cmd &``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def sparkwatch(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
               preexec: Callable[[], None] | None = None) -> Iterator[Command]:
    marker = uuid.uuid4().hex
    out, err = tmp_path / f"out-{marker}", tmp_path / f"err-{marker}"
    # Unmeasured: coverage's SIGTERM handler, installed as the interpreter starts, would make
    # handlers_installed() true before sparkwatch's own are.
    environ = {**unmeasured(dict(os.environ)), MARK: marker, "COLUMNS": "160",
               "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
    with out.open("wb") as out_file, err.open("wb") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "sparkwatch.cli.main", *args],
                                stdout=out_file, stderr=err_file, env=environ, cwd=tmp_path,
                                start_new_session=True, preexec_fn=preexec)
    command = Command(proc, marker, out, err)
    try:
        yield command
    finally:
        command.stop()


# --- collector ------------------------------------------------------------------------------------


def collector_args(tmp_path: Path, port: int) -> list[str]:
    return ["collector", "--host", "127.0.0.1", "--port", str(port), "--no-auth",
            "--history-url", f"sqlite:///{tmp_path / 'history.db'}",
            "--spool-dir", str(tmp_path / "spool"), "--retention-days", "3650"]


def healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_collector_stopped_while_it_starts(tmp_path: Path, sig: signal.Signals) -> None:
    with sparkwatch(tmp_path, *collector_args(tmp_path, free_port())) as collector:
        wait_for(collector.handlers_installed, 30, "the collector's signal handlers")
        collector.send(sig)  # during its imports: the web stack takes a second or more
        collector.ends_cleanly(sig)


@pytest.mark.parametrize("first, second", [(signal.SIGTERM, signal.SIGTERM),
                                           (signal.SIGINT, signal.SIGTERM),
                                           (signal.SIGINT, signal.SIGINT)],
                         ids=["SIGTERM-SIGTERM", "SIGINT-SIGTERM", "SIGINT-SIGINT"])
def test_collector_stopped_while_serving_and_again_while_stopping(
        tmp_path: Path, first: signal.Signals, second: signal.Signals) -> None:
    """--no-auth is a bare flag; the history writer's child process ends with the collector."""
    port = free_port()
    with sparkwatch(tmp_path, *collector_args(tmp_path, port)) as collector:
        wait_for(lambda: healthy(port), 30, "the collector's /healthz")
        answer = httpx.post(f"http://127.0.0.1:{port}/api/v1/events",
                            json={"events": run_events(terminated=False)}, timeout=30)
        assert answer.status_code == 200, answer.text
        wait_for(lambda: len(collector.marked()) >= 2, 30, "the history writer's process")
        collector.send(first)
        wait_for(lambda: "Shutting down" in collector.err.read_text(), 30, "the stop to begin")
        collector.send(second)
        err = collector.ends_cleanly(first)
    # uvicorn alone takes a second Ctrl-C as "exit now", skipping the service's stop
    assert "already stopping" in err and "Waiting for application shutdown" in err, err


def test_a_collector_started_with_sigint_ignored_stays_up_on_ctrl_c_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    """Ctrl-C at the terminal of a script that started the collector in the background reaches
    the collector's process group too: the script stops, the collector serves on. SIGINT first,
    then SIGTERM: were SIGINT taken as the stop, the exit status would say 130."""
    port = free_port()
    with sparkwatch(tmp_path, *collector_args(tmp_path, port), preexec=ignoring_sigint) as c:
        wait_for(lambda: healthy(port), 30, "the collector's /healthz")
        c.send(signal.SIGINT)
        c.send(signal.SIGTERM)
        err = c.ends_cleanly(signal.SIGTERM)
    assert err.count("Shutting down") == 1, err


def test_run_passes_an_ignored_sigint_on_to_its_command(tmp_path: Path) -> None:
    show = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    for preexec, shown in ((ignoring_sigint, "True"), (None, "False")):
        with sparkwatch(tmp_path, "run", "--", sys.executable, "-c", show,
                        env={"SPARKWATCH_METRICS_PORT": "0", "SPARKWATCH_HISTORY_URL": "off"},
                        preexec=preexec) as run:
            assert run.proc.wait(60) == 0, run.err.read_text()
            assert run.out.read_text().strip() == shown


# --- top ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def collector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp_path = tmp_path_factory.mktemp("collector")
    port = free_port()
    with sparkwatch(tmp_path, *collector_args(tmp_path, port)):
        wait_for(lambda: healthy(port), 30, "the collector's /healthz")
        answer = httpx.post(f"http://127.0.0.1:{port}/api/v1/events",
                            json={"events": run_events(terminated=False)}, timeout=30)
        assert answer.status_code == 200, answer.text
        yield f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("moment", ["start-up", "live"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_top_stopped_in_its_terminal(collector_url: str, sig: signal.Signals,
                                     moment: str) -> None:
    """Ctrl-C is the terminal's interrupt character; the cursor is shown again on the way out
    (SIGTERM used to kill top where it stood, its terminal left without echo)."""
    child = spawn_top("--collector", collector_url, "--interval", "0.5", measured=False)
    try:
        wait_for(lambda: handlers_installed(child.pid), 30, "top's signal handlers")
        if moment == "live":
            child.expect_exact(FRAME_END, timeout=30)
        if sig == signal.SIGINT:
            child.sendintr()
        else:
            child.kill(sig)
        child.expect(pexpect.EOF, timeout=EXIT_SECONDS)
        output = child.before or ""
        child.wait()
    finally:
        child.close(force=True)
    assert child.exitstatus == status(sig), (child.exitstatus, child.signalstatus, output)
    assert not [word for word in NOISE if word in output], output
    if moment == "live":
        assert output.rstrip("\r\n").endswith(SHOW_CURSOR), repr(output[-200:])


# --- doctor, blocked on a server that never answers ---------------------------------------------


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_doctor_stopped_while_waiting_for_a_silent_collector(
        tmp_path: Path, sig: signal.Signals) -> None:
    with closing(socket.socket()) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        with sparkwatch(tmp_path, "doctor", "--collector", url) as doctor:
            connection, _ = server.accept()  # the doctor now waits for an answer
            with closing(connection):
                doctor.send(sig)
                doctor.ends_cleanly(sig)
        assert doctor.out.read_text() == ""


def test_history_stopped_while_waiting_for_a_locked_database(tmp_path: Path) -> None:
    """SQLite holds the reader in its busy wait (up to 5 s); Ctrl-C ends it once SQLite returns,
    quietly, not as a "database is locked" error."""
    db = tmp_path / "history.db"
    with closing(sqlite3.connect(db, isolation_level=None)) as writer:
        writer.execute("CREATE TABLE held (x)")  # even the schema's first read waits for it
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("INSERT INTO held VALUES (1)")
        with sparkwatch(tmp_path, "history", "queries", "--url", f"sqlite:///{db}") as history:
            wait_for(lambda: has_open(history.proc.pid, db), 30, "the history opening the db")
            history.send(signal.SIGINT)
            history.ends_cleanly(signal.SIGINT)
    assert history.out.read_text() == ""


def has_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(fd) == str(path) for fd in Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False


# --- demo (real Spark, twice) ---------------------------------------------------------------------


def history_statuses(path: Path) -> list[str]:
    if not path.exists():
        return []
    with closing(sqlite3.connect(path)) as db:
        try:
            return [status for (status,) in db.execute("select status from query_runs")]
        except sqlite3.OperationalError:  # not created yet
            return []


@pytest.mark.spark
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_demo_stopped_while_spark_starts(tmp_path: Path, sig: signal.Signals) -> None:
    """The signal lands while the JVM starts: it ends with the demo, and nothing was recorded."""
    history = tmp_path / "history.db"
    with sparkwatch(tmp_path, "demo", "--port", str(free_port()),
                    "--history-url", f"sqlite:///{history}") as demo:
        wait_for(lambda: demo.out.read_text().startswith("starting Spark"), 60,
                 "the demo's first line")
        wait_for(lambda: len(demo.marked()) >= 2, 60, "Spark's JVM process")
        demo.send(sig)
        demo.ends_cleanly(sig, DEMO_EXIT_SECONDS)
    assert "running" not in history_statuses(history)


@DEMOS  # nine queries: one after another with the other demos, never beside them
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_demo_stopped_by_ctrl_c_and_again_by_sigterm_while_stopping(tmp_path: Path) -> None:
    """The second signal is noted and the clean stop goes on: every run ends in the history."""
    history = tmp_path / "history.db"
    with sparkwatch(tmp_path, "demo", "--port", str(free_port()),
                    "--history-url", f"sqlite:///{history}") as demo:
        # The first run recorded: the others are starting, the stop meets them half-way.
        wait_for(lambda: "running" in history_statuses(history), 180,
                 "a demo run recorded as running")
        demo.send(signal.SIGINT)
        wait_for(lambda: "stopping queries" in demo.out.read_text(), 30, "the demo's stop")
        demo.send(signal.SIGTERM)
        err = demo.ends_cleanly(signal.SIGINT, DEMO_EXIT_SECONDS)
    assert "sparkwatch demo: stopping the queries" in err, err  # the second signal, noted
    statuses = history_statuses(history)
    assert statuses and "running" not in statuses, statuses
    assert "final state:" in demo.out.read_text()


@DEMOS
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_a_demo_started_with_sigint_ignored_runs_on_through_ctrl_c_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    """PySpark's SparkContext put its own SIGINT handler over the ignored one as the demo's Spark
    started, and the demo then handled SIGINT too: a background demo stopped on the script's
    Ctrl-C. SIGINT, then SIGTERM: were SIGINT taken, the exit status would say 130."""
    history = tmp_path / "history.db"
    with sparkwatch(tmp_path, "demo", "--port", str(free_port()),
                    "--history-url", f"sqlite:///{history}", preexec=ignoring_sigint) as demo:
        wait_for(lambda: "running" in history_statuses(history), 180,
                 "a demo run recorded as running")
        demo.send(signal.SIGINT)
        demo.send(signal.SIGTERM)
        demo.ends_cleanly(signal.SIGTERM, DEMO_EXIT_SECONDS)
    statuses = history_statuses(history)
    assert statuses and "running" not in statuses, statuses


@DEMOS
@pytest.mark.spark
@pytest.mark.timeout(300)
def test_demo_stopped_by_sigterm_to_its_process_group_stops_its_queries_in_order(
    tmp_path: Path
) -> None:
    """``timeout``, ``kill -- -PGID`` and service managers signal the whole group: Spark's JVM
    got the SIGTERM too and ended at once, every running query was shown failed ("SparkContext
    was shut down") and the demo's own stop traced back on the dead gateway."""
    history = tmp_path / "history.db"
    with sparkwatch(tmp_path, "demo", "--port", str(free_port()),
                    "--history-url", f"sqlite:///{history}") as demo:
        wait_for(lambda: "running" in history_statuses(history), 180,
                 "a demo run recorded as running")
        demo.send(signal.SIGTERM, group=True)
        demo.ends_cleanly(signal.SIGTERM, DEMO_EXIT_SECONDS)
    out = demo.out.read_text()
    final = out.split("final state:", 1)[-1]
    assert "final state:" in out and "terminated" in final, out[-3000:]
    assert "failed" not in final and "SparkContext was shut down" not in out, final
    assert "running" not in history_statuses(history)


# --- state ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def aggregation_checkpoint(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The checkpoint of a small streaming aggregation, two batches long."""
    from pyspark.sql import functions as F

    root = tmp_path_factory.mktemp("state-signals") / "checkpoint"
    rows = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    query = (rows.groupBy((F.col("value") % 20).alias("key")).count()
             .writeStream.format("noop").outputMode("update")
             .option("checkpointLocation", str(root)).start())
    try:
        wait_for(lambda: (query.lastProgress or {}).get("batchId", -1) >= 1, 120,
                 "two batches of the aggregation")
    finally:
        query.stop()
    return root


def spark_context_up(local_dirs: Path) -> bool:
    """The driver's block manager made its directory: the SparkContext has started."""
    return any(local_dirs.glob("blockmgr-*"))


@pytest.mark.spark
@pytest.mark.parametrize("moment", ["jvm starting", "context up"])
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_state_stopped_while_it_starts_spark_or_reads(
    aggregation_checkpoint: Path, tmp_path: Path, sig: signal.Signals, moment: str
) -> None:
    """No Py4J stack, no PySpark warning, no JVM left: PySpark's own SIGINT handler (which calls
    the JVM from inside the interrupted call) is kept out, and Py4J's records of the calls the
    stop breaks are not shown."""
    local_dirs = tmp_path / "spark-local"
    local_dirs.mkdir()
    with sparkwatch(tmp_path, "state", str(aggregation_checkpoint),
                    env={"SPARK_LOCAL_DIRS": str(local_dirs)}) as state:
        wait_for(lambda: len(state.marked()) >= 2 and state.handlers_installed(), 60,
                 "Spark's JVM process")
        if moment == "context up":
            wait_for(lambda: spark_context_up(local_dirs) or state.proc.poll() is not None,
                     60, "the SparkContext")
        if state.proc.poll() is not None:
            pytest.fail(f"state ended before the signal: {state.err.read_text()[-2000:]}")
        state.send(sig)
        err = state.ends_cleanly(sig)
    assert "RuntimeWarning" not in err and "ERROR root" not in err, err


def test_signals_sent_over_and_over_while_a_command_ends_never_kill_it(tmp_path: Path) -> None:
    """Python puts back the default action of a signal it handled as the interpreter ends: a
    second SIGTERM then killed the stopping command (status -15), whatever it was still doing."""
    with closing(socket.socket()) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        with sparkwatch(tmp_path, "doctor", "--collector", url) as doctor:
            connection, _ = server.accept()
            with closing(connection):
                doctor.send(signal.SIGTERM)
                while doctor.proc.poll() is None:  # until it has ended, however it ended
                    with suppress(ProcessLookupError):
                        doctor.send(signal.SIGTERM)
                    time.sleep(0.0005)  # pacing the barrage, not waiting for a condition
                doctor.ends_cleanly(signal.SIGTERM)


# --- a command on a thread that is not Python's main one ---------------------------------------

# An orchestrator that embeds main() on a worker thread. Python runs signal handlers on the main
# thread only and lets no other thread install one: the process's signals stay the host's.
HOST = """\
import sys, threading
from sparkwatch.cli.main import main
worker = threading.Thread(target=main, args=(sys.argv[1:],), name="orchestrated")
worker.start()
worker.join()
"""


@pytest.mark.spark
def test_a_demo_on_a_worker_thread_ends_with_its_host_and_leaves_no_jvm(tmp_path: Path) -> None:
    """No handler of ours off the main thread: a SIGTERM to a host that keeps the default action
    ends the host at once (143 in a shell), without a traceback. The JVM, in a session of its own
    (sparkwatch.jvm), ends at its stdin's end of file with its Python workers: none is left."""
    local_dirs = tmp_path / "spark-local"
    local_dirs.mkdir()
    marker = uuid.uuid4().hex
    out, err = tmp_path / "out", tmp_path / "err"
    environ = {**unmeasured(dict(os.environ)), MARK: marker, "PYSPARK_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(local_dirs),
               "TMPDIR": str(tmp_path)}  # the demo's kept log; its checkpoints, were it so far
    with out.open("wb") as out_file, err.open("wb") as err_file:
        proc = subprocess.Popen([sys.executable, "-c", HOST, "demo", "--port", "0",
                                 "--history-url", "off"], stdout=out_file, stderr=err_file,
                                env=environ, cwd=tmp_path, start_new_session=True)
    host = Command(proc, marker, out, err)
    try:
        wait_for(lambda: spark_context_up(local_dirs) or proc.poll() is not None, 120,
                 "the demo's SparkContext")
        assert proc.poll() is None, err.read_text()[-2000:]
        host.send(signal.SIGTERM)
        assert proc.wait(EXIT_SECONDS) == -signal.SIGTERM
        said = err.read_text(errors="replace")
        assert not [word for word in NOISE if word in said], said[-3000:]
        wait_for(lambda: not host.marked(), CHILDREN_GONE_SECONDS,
                 f"no child of the ended host left ({host.describe_marked()})")
    finally:
        host.stop()
