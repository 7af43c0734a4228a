"""`sparkwatch run -- COMMAND`: an unmodified PySpark app, configured only by SPARKWATCH_*
variables, is observed under spark-submit and plain python; the command keeps its signals and its
exit status; a sitecustomize already on the path still runs."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sparkwatch.bootstrap import PATH as BOOTSTRAP_PATH
from sparkwatch.cli.run import child_environment
from tests.conftest import CONNECT_PORT, ROOT, unavailable
from tests.support import unmeasured, wait_for

SPARKWATCH = [sys.executable, "-m", "sparkwatch.cli.main"]

# The app knows nothing of sparkwatch: what a user already has.
APP = '''\
import sys, time
from pathlib import Path
from pyspark.sql import SparkSession, functions as F

stop_file = Path(sys.argv[1])
spark = (SparkSession.builder.{master}("local[2]").appName("unmodified-app")
         .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
         .getOrCreate())
counts = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
          .groupBy((F.col("value") % 3).alias("k")).count())
query = (counts.writeStream.queryName("unmodified_counts").outputMode("complete")
         .format("noop").trigger(processingTime="500 milliseconds").start())
deadline = time.monotonic() + 300
while not stop_file.exists() and time.monotonic() < deadline:
    query.awaitTermination(0.2)
query.stop()
spark.stop()
sys.exit(3)
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**sparkwatch: str) -> dict[str, str]:
    """The test's environment without any SPARKWATCH_* of its own, plus ``sparkwatch``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARKWATCH_")}
    env.pop("PYTHONPATH", None)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    env.update(sparkwatch)
    return env


def operator_series(port: int, query_name: str) -> dict[str, float]:
    """spark_streaming_state_* samples of ``query_name`` (empty until its first progress)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
    except OSError:
        return {}
    return {
        f"{s.name}#{s.labels['operator_index']}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("spark_streaming_state_")
        and s.labels.get("query_name") == query_name
        and "operator_index" in s.labels
    }


def spark_submit() -> str:
    try:
        import pyspark
    except ImportError:
        unavailable("pyspark not installed")
    path = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not path.exists():
        unavailable("pyspark ships no bin/spark-submit")
    return str(path)


def spark_connect_runs_client_listeners() -> bool:
    import pyspark

    return int(pyspark.__version__.split(".")[0]) >= 4


@pytest.mark.spark
@pytest.mark.parametrize(
    "launcher",
    [
        "spark-submit",
        "python",
        pytest.param("python-connect", marks=CONNECT_PORT),
        # Cluster deploy mode's way (docs/run.md): the driver's environment names the bootstrap
        # (spark.kubernetes.driverEnv.PYTHONPATH, spark.yarn.appMasterEnv.PYTHONPATH).
        "spark-submit-driver-env",
    ],
)
def test_an_unmodified_app_serves_per_operator_series_and_says_it_attached(
    tmp_path: Path, launcher: str
) -> None:
    app, stop_file, port = tmp_path / "app.py", tmp_path / "stop", free_port()
    connect = launcher == "python-connect"
    if connect and not spark_connect_runs_client_listeners():
        pytest.skip("the Connect listener runs client-side from Spark 4.0")
    app.write_text(APP.replace("{master}", "remote" if connect else "master"))
    submit = launcher.startswith("spark-submit")
    command = [spark_submit() if submit else sys.executable, str(app), str(stop_file)]
    env = clean_env(SPARKWATCH_METRICS_PORT=str(port), SPARKWATCH_HISTORY_URL="off")
    if launcher == "spark-submit-driver-env":
        env["PYTHONPATH"] = sparkwatch_run_print_path()
    else:
        command = [*SPARKWATCH, "run", "--", *command]
    stdout_path, stderr_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with stdout_path.open("w") as stdout, stderr_path.open("w") as stderr:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=stdout, stderr=stderr)
    try:
        series: dict[str, float] = {}

        def stateful_batches_seen() -> bool:
            assert proc.poll() is None, stderr_path.read_text()[-3000:]
            series.update(operator_series(port, "unmodified_counts"))
            return series.get("spark_streaming_state_rows#0", 0) == 3

        wait_for(stateful_batches_seen, 240, "per-operator series of the unmodified app")
        assert series["spark_streaming_state_rows_updated_total#0"] >= 3
        stop_file.touch()
        assert proc.wait(timeout=120) == 3  # the app's own exit status
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = stderr_path.read_text()
    if submit:
        # spark-submit merges the Python driver's stderr into its own stdout.
        err = stdout_path.read_text() + err
    attached = re.findall(r"^sparkwatch \S+ attached to (\S+) \((\w+) mode\): (.*)$", err, re.M)
    assert len(attached) == 1, err[-3000:]
    app_id, mode, where = attached[0]
    assert app_id and mode == ("public" if connect else "jvm")
    assert where == f"metrics http://localhost:{port}/metrics, history off, push off"
    stopped = re.findall(rf"^sparkwatch stopped for {app_id}: (\d+) events received, 0 dropped",
                         err, re.M)
    assert len(stopped) == 1 and int(stopped[0]) >= 3, err[-3000:]


def test_the_exit_status_is_the_commands() -> None:
    done = subprocess.run([*SPARKWATCH, "run", "--", sys.executable, "-c", "raise SystemExit(7)"],
                          env=clean_env(), capture_output=True, timeout=60)
    assert done.returncode == 7


def test_a_missing_command_is_one_line_and_127() -> None:
    done = subprocess.run([*SPARKWATCH, "run", "--", "no-such-command-sparkwatch"],
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 127
    assert done.stderr.strip() == "sparkwatch run: command not found: no-such-command-sparkwatch"


def test_a_file_that_is_no_program_is_one_line_and_126(tmp_path: Path) -> None:
    garbage = tmp_path / "not-a-program"
    garbage.write_bytes(b"\x00\x01 no shebang, no ELF")
    garbage.chmod(0o755)
    done = subprocess.run([*SPARKWATCH, "run", "--", str(garbage)], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 126
    assert done.stderr.strip() == f"sparkwatch run: cannot execute {garbage}: Exec format error"


def test_no_command_is_a_usage_error_naming_the_subcommand() -> None:
    done = subprocess.run([*SPARKWATCH, "run"], env=clean_env(), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "sparkwatch run: error: no command to run: sparkwatch run -- spark-submit app.py")


def test_an_empty_command_is_a_usage_error_in_one_line() -> None:
    done = subprocess.run([*SPARKWATCH, "run", "--", ""], env=clean_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "sparkwatch run: error: the command to run is empty: sparkwatch run -- spark-submit app.py")


def test_an_argument_with_a_nul_character_is_a_usage_error_in_one_line() -> None:
    # No shell passes a NUL; a caller of main() can (in a child: a successful exec replaces it).
    calls_main = "from sparkwatch.cli.main import main; raise SystemExit(main(['run', '--', " \
        "'python', 'a\\0b']))"
    done = subprocess.run([sys.executable, "-c", calls_main], env=clean_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "sparkwatch run: error: cannot execute the command: an argument holds a NUL character")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_reach_the_command(sig: signal.Signals) -> None:
    child = (
        "import signal, sys\n"
        "signal.signal(signal.SIGTERM, lambda n, f: sys.exit(40 + n))\n"
        "signal.signal(signal.SIGINT, lambda n, f: sys.exit(40 + n))\n"
        "print('ready', flush=True)\n"
        "signal.pause()\n"
    )
    proc = subprocess.Popen([*SPARKWATCH, "run", "--", sys.executable, "-c", child],
                            env=clean_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 40 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()



def run_statuses(db: Path) -> dict[str, int]:
    """How many runs of the history at ``db`` have each status (empty before its first write)."""
    if not db.exists():
        return {}
    with sqlite3.connect(db, timeout=30) as conn:
        try:
            return dict(conn.execute("select status, count(*) from query_runs "
                                     "where batches > 0 group by status").fetchall())
        except sqlite3.OperationalError:  # the schema is not there yet
            return {}


# The same app, its session built on a thread of its own (a web app's, an orchestrator's), not a
# daemon: only the main thread may set a signal's handler, and it waits for that thread meanwhile
# ("waits"), or has ended once the query started, Python waiting for the thread ("ends").
THREADED_APP = """\
import threading

started = threading.Event()

def work():
""" + "".join(f"    {line}\n" if line else "\n" for line in APP.replace(
    "deadline =", "started.set()\ndeadline =").splitlines()) + """
worker = threading.Thread(target=work, name="builds-the-session", daemon={daemon})
worker.start()
{main}
"""
THREADED_MAINS = {"waits": ("False", "while worker.is_alive():\n    worker.join(0.5)"),
                  "ends": ("False", "started.wait(240)")}


def stopped_by(sig: signal.Signals, app_text: str, tmp_path: Path) -> tuple[int, str, Path]:
    """Runs ``app_text`` under ``sparkwatch run`` until its history holds a running run, sends it
    ``sig`` (SIGINT to its process group, as a terminal does): its exit status, stderr and
    history."""
    app, db = tmp_path / "app.py", tmp_path / "history.db"
    app.write_text(app_text)
    env = clean_env(SPARKWATCH_METRICS_PORT=str(free_port()),
                    SPARKWATCH_HISTORY_URL=f"sqlite:///{db}")
    env = unmeasured(env)  # coverage's SIGTERM handler would be the app's own, which it keeps
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr:
        proc = subprocess.Popen([*SPARKWATCH, "run", "--", sys.executable, str(app),
                                 str(tmp_path / "never")], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
    try:
        wait_for(lambda: run_statuses(db).get("running", 0) == 1, 240, "a running run written")
        if sig == signal.SIGINT:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return code, stderr_path.read_text(), db


def assert_stopped_cleanly(db: Path, err: str) -> None:
    """The run ended as lost, the stop line said, no traceback of ours."""
    assert run_statuses(db) == {"lost": 1}, err[-3000:]
    assert re.search(r"^sparkwatch stopped for \S+: \d+ events received", err, re.M), err[-3000:]
    assert "sparkwatch/" not in err and "listener/" not in err, "no traceback of ours"


@pytest.mark.spark
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_unmodified_app_stopped_by_a_signal_leaves_no_run_running(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGTERM (to the command) or Ctrl-C (to its process group, as a terminal sends it) while
    the app streams: the listener writes what it holds and ends the run it saw start as lost,
    since no QueryTerminated will come; the stop line is printed."""
    code, err, db = stopped_by(sig, APP.replace("{master}", "master"), tmp_path)
    # SIGTERM: SystemExit(143) through atexit (the attach's handler, the app having none);
    # Ctrl-C: the app's own KeyboardInterrupt, which ends Python by SIGINT, as without us.
    assert code == (128 + sig if sig == signal.SIGTERM else -sig), err[-3000:]
    assert_stopped_cleanly(db, err)


@pytest.mark.spark
@pytest.mark.parametrize("main_thread", ["waits", "ends"])
def test_an_app_that_builds_its_session_on_a_thread_stopped_by_sigterm_leaves_no_run_running(
    tmp_path: Path, main_thread: str
) -> None:
    """SIGTERM to an app whose session was built off the main thread, where it once died at once
    with its run left running and its last events unwritten. What is held is written, then
    SIGTERM ends the process as the default action would: unwinding the main thread would leave
    Python waiting for the app's thread, a stream that never ends ("waits": it hung until
    SIGKILL), and once the main thread has ended an exception raised there is ignored ("ends":
    the app exited 0 with a traceback)."""
    daemon, main = THREADED_MAINS[main_thread]
    app = THREADED_APP.replace("{master}", "master").replace("{daemon}", daemon)
    code, err, db = stopped_by(signal.SIGTERM, app.replace("{main}", main), tmp_path)
    assert code == -signal.SIGTERM, err[-3000:]
    assert_stopped_cleanly(db, err)


def test_the_hook_is_installed_and_an_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = 'yes'\n")
    probe = (
        "import os, sys\n"
        "hooked = any(type(f).__name__ == '_SessionModuleFinder' for f in sys.meta_path)\n"
        "print(os.environ.get('THEIRS_RAN'), hooked, 'pyspark' in sys.modules)\n"
    )
    env = {**clean_env(), "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([*SPARKWATCH, "run", "--", sys.executable, "-c", probe], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # Theirs ran, ours hooked the session modules, and nothing imported pyspark eagerly.
    assert done.stdout.split() == ["yes", "True", "False"]


def test_the_child_environment_puts_the_bootstrap_first_and_keeps_the_rest() -> None:
    env = child_environment({"PYTHONPATH": "/a:/b", "HOME": "/h"}, python="/venv/bin/python")
    assert env["PYTHONPATH"] == f"{BOOTSTRAP_PATH}:/a:/b" and env["HOME"] == "/h"
    assert env["PYSPARK_DRIVER_PYTHON"] == "/venv/bin/python"
    chosen = child_environment({"PYSPARK_PYTHON": "/their/python"}, python="/venv/bin/python")
    assert "PYSPARK_DRIVER_PYTHON" not in chosen and chosen["PYTHONPATH"] == BOOTSTRAP_PATH


def sparkwatch_run_print_path() -> str:
    done = subprocess.run([*SPARKWATCH, "run", "--print-path"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_print_path_names_the_bootstrap_directory() -> None:
    path = sparkwatch_run_print_path()
    assert path == BOOTSTRAP_PATH and (Path(path) / "sitecustomize.py").is_file()
