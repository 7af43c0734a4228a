"""`sparkwatch run` and the listener's settings against a hostile or broken world: another
sparkwatch's bootstrap on the path, a command that writes into a closed pipe, settings that can
never work (from the environment, bytes that are not UTF-8 among them, and from Spark conf), a
metrics port another process holds, an app that stops and builds its session again or builds it
in a thread, a `sparkwatch run` inside a `sparkwatch run`. The app is never broken: its exit
status is its own, a bad setting is one line naming it, and nothing of ours is a traceback."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparkwatch.bootstrap import PATH as BOOTSTRAP_PATH
from sparkwatch.settings import SettingsError, load_listener_settings
from tests.test_run import clean_env

SPARKWATCH = [sys.executable, "-m", "sparkwatch.cli.main"]

THEIRS = "import sys\nsys.theirs_ran = getattr(sys, 'theirs_ran', 0) + 1\n"
"""The user's own sitecustomize: counts its runs in this interpreter."""

PROBE = (
    "import sys\n"
    "hooks = sum(type(f).__name__ == '_SessionModuleFinder' for f in sys.meta_path)\n"
    "print(getattr(sys, 'theirs_ran', 0), hooks)\n"
)
"""The command: how often the user's sitecustomize ran and how many attach hooks are installed."""


PYTHON_ERROR = re.compile(r"[A-Za-z.]*(Error|Exception)\b")
"""The last line of a Python traceback (``RecursionError: maximum recursion depth ...``)."""


def ours(stderr: str) -> list[str]:
    """The lines of ``stderr`` that sparkwatch wrote, or that are a Python error of any kind."""
    return [line for line in stderr.splitlines()
            if line.startswith(("sparkwatch", "Traceback")) or PYTHON_ERROR.match(line)]


@pytest.mark.parametrize("second", ["another-install", "symlink", "nested-run"])
def test_a_second_bootstrap_on_the_path_runs_the_users_sitecustomize_once_and_says_nothing(
    tmp_path: Path, second: str
) -> None:
    """Another sparkwatch's bootstrap (a nested `sparkwatch run` of another install), or this one
    by another name, shadowed ours and ran the one it shadowed in turn: ours again, to Python's
    recursion limit, five RecursionError lines in every Python process of the app."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(THEIRS)
    command = [*SPARKWATCH, "run", "--", sys.executable, "-c", PROBE]
    path = [str(theirs)]
    if second == "nested-run":
        command = [*SPARKWATCH, "run", "--", *command]
    else:
        other = tmp_path / "other" / "bootstrap"
        other.parent.mkdir()
        if second == "symlink":
            other.symlink_to(BOOTSTRAP_PATH, target_is_directory=True)
        else:
            shutil.copytree(BOOTSTRAP_PATH, other, ignore=shutil.ignore_patterns("__pycache__"))
        path.insert(0, str(other))
    env = {**clean_env(), "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1", "1"]  # theirs ran once; one hook
    assert ours(done.stderr) == []


def test_a_command_writing_into_a_closed_pipe_ends_by_sigpipe_as_without_sparkwatch() -> None:
    """Python ignores SIGPIPE (and SIGXFSZ) from its start, and an ignored signal stays ignored
    across exec: `sparkwatch run -- yes | head` ended with "Broken pipe" and status 1."""
    proc = subprocess.Popen([*SPARKWATCH, "run", "--", "yes"], env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.read(4096).startswith(b"y\ny\n")
        proc.stdout.close()  # the reader goes away, as `head` does
        assert proc.wait(timeout=60) == -signal.SIGPIPE
        assert proc.stderr is not None and proc.stderr.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_empty_pythonpath_entry_still_puts_the_current_directory_on_the_apps_path(
    tmp_path: Path,
) -> None:
    """``PYTHONPATH=/lib:`` (an empty entry: the current directory) for an app run from its
    project's root: the run dropped the empty entry, and the app's import failed."""
    (tmp_path / "helper.py").write_text("ANSWER = 42\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "app.py").write_text("import helper\nprint(helper.ANSWER)\n")
    env = {**clean_env(), "PYTHONPATH": f"{tmp_path / 'lib'}{os.pathsep}"}
    done = subprocess.run([*SPARKWATCH, "run", "--", sys.executable, "jobs/app.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, ours(done.stderr)) == (0, "42\n", [])


@pytest.mark.parametrize(("variable", "value", "expected"), [
    ("SPARKWATCH_PUSH_URL", "file:///etc/passwd",
     "SPARKWATCH_PUSH_URL=file:///etc/passwd: expected an http:// or https:// URL with a host"),
    ("SPARKWATCH_PUSH_URL", "http+unix://%2Frun%2Fcollector.sock/api/v1/events",
     "SPARKWATCH_PUSH_URL=http+unix://%2Frun%2Fcollector.sock/api/v1/events: expected an http://"),
    ("SPARKWATCH_PUSH_URL", "http:///api/v1/events",
     "SPARKWATCH_PUSH_URL=http:///api/v1/events: expected an http:// or https:// URL with a host"),
    ("SPARKWATCH_PUSH_URL", "http://collector:port/api/v1/events",
     "SPARKWATCH_PUSH_URL=<unparseable URL>: not a valid URL"),
    ("SPARKWATCH_PUSH_URL", "http://collector:9751/\r\nX-Injected: 1",
     "SPARKWATCH_PUSH_URL=http://collector:9751/X-Injected: 1: expected an http:// or https:// "
     "URL, without spaces or control characters"),
    ("SPARKWATCH_PUSH_URL", os.fsdecode(b"http://coll\xffector/"),
     "SPARKWATCH_PUSH_URL=http://coll\udcffector/: expected an http:// or https:// URL, "
     "without spaces or control characters"),
    ("SPARKWATCH_PUSH_URL", "http://collector:9751/\u00e9vents",
     "SPARKWATCH_PUSH_URL=http://collector:9751/\u00e9vents: expected a URL whose path, query "
     "and user are ASCII"),
    ("SPARKWATCH_METRICS_ADDRESS", os.fsdecode(b"\xff\xfe"),
     "SPARKWATCH_METRICS_ADDRESS='\\udcff\\udcfe': expected an address or host name, without "
     "spaces or control characters"),
    ("SPARKWATCH_METRICS_ADDRESS", "driver\n1",
     "SPARKWATCH_METRICS_ADDRESS='driver\\n1': expected an address or host name"),
    ("SPARKWATCH_METRICS_ADDRESS", "x" * 300,  # quoted cut short (200 characters)
     f"SPARKWATCH_METRICS_ADDRESS='{'x' * 196}...: not an address or host name"),
    ("SPARKWATCH_METRICS_ALLOW", "(" * 100_000,
     "SPARKWATCH_METRICS_ALLOW='((("),
    ("SPARKWATCH_METRICS_DENY", "spark_.{99999999999}",
     "SPARKWATCH_METRICS_DENY='spark_.{99999999999}': a regex the regex compiler cannot take"),
])
def test_a_setting_that_can_never_work_is_a_settings_error_naming_it(
    variable: str, value: str, expected: str
) -> None:
    """Each was taken before: the push sink retried a file:// URL for ever, an address the
    resolver cannot be asked for ended the attach with a UnicodeError naming no setting, and a
    regex the compiler cannot take raised RecursionError or OverflowError."""
    with pytest.raises(SettingsError) as refused:
        load_listener_settings({variable: value})
    assert str(refused.value).startswith(expected)


@pytest.mark.parametrize(("variable", "value", "taken"), [
    ("SPARKWATCH_PUSH_URL", "http://collector:9751/api/v1/events", None),
    ("SPARKWATCH_PUSH_URL", " https://[::1]:9751/api/v1/events ", "https://[::1]:9751/api/v1/events"),
    ("SPARKWATCH_PUSH_URL", "", "off"),
    ("SPARKWATCH_PUSH_URL", "off", "off"),
    ("SPARKWATCH_METRICS_ADDRESS", "::1", None),
    ("SPARKWATCH_METRICS_ADDRESS", "driver-1.spark.svc.cluster.local", None),
    ("SPARKWATCH_METRICS_ALLOW", "spark_streaming_state_rocksdb_.*, spark_.{2}_x", "both"),
])
def test_settings_that_can_work_are_still_taken(variable: str, value: str,
                                                taken: str | None) -> None:
    settings = load_listener_settings({variable: value})
    got = getattr(settings, variable.removeprefix("SPARKWATCH_").lower())
    expected = {None: value, "off": None,
                "both": ("spark_streaming_state_rocksdb_.*", "spark_.{2}_x")}.get(taken, taken)
    assert got == expected


@pytest.mark.parametrize("address", ["\udcff", "x" * 300])
def test_an_address_the_resolver_cannot_be_asked_for_is_an_exporter_error_not_a_unicode_error(
    address: str,
) -> None:
    """What attach() turns into one warning and a listener without /metrics; a UnicodeError
    went past it and ended the attach."""
    from prometheus_client import CollectorRegistry

    from sparkwatch.listener.exporter import ExporterError, serve_metrics

    with pytest.raises(ExporterError, match=r"^cannot serve /metrics on '.*':0: encoding with "):
        serve_metrics(CollectorRegistry(), address, 0)


def test_a_plan_for_a_history_that_cannot_be_opened_is_given_up_at_once_when_detach_hurries(
    tmp_path: Path,
) -> None:
    """detach() flushes the plans still queued: their writes waited out the plan history's
    backoff (1 s, then 2 s) against a history that was down, inside ``spark.stop()``."""
    from sparkwatch.listener.plan_reader import PlanHistory, PlanReader
    from tests.test_plan_reader import progress

    unopenable = tmp_path / "history.db"
    unopenable.mkdir()
    history = PlanHistory(f"sqlite:///{unopenable}", migrate=False)
    reader = PlanReader(None, [("history", history)], unavailable="no JVM in this test")
    history.wait, history.stopped = reader.pause, reader.stopping  # as make_plan_reader wires it
    try:
        reader(progress("q-hurried", "r-hurried"))
        reader.hurry()
        started = time.monotonic()
        assert reader.flush(10)
        assert time.monotonic() - started < 1.0
    finally:
        reader.stop(5)
        history.close()


def held_port() -> socket.socket:
    """A listening socket on every interface: the metrics port another process holds."""
    holder = socket.socket()
    holder.bind(("0.0.0.0", 0))  # nosec B104 - as the listener binds it
    holder.listen()
    return holder


# One driver, three sessions one after another: one built in a thread (and got again from the
# main thread) whose metrics port another process holds and whose history cannot be opened, then
# two refused by a Spark conf value that can never work. (The first session's builder conf
# becomes the JVM's system properties, which every later session's conf starts from: the refused
# ones come after it.)
SESSIONS_APP = '''\
import sys, threading, time
from pathlib import Path
from pyspark.sql import SparkSession, functions as F

def build(**conf):
    builder = (SparkSession.builder.master("local[1]").appName("hostile-sessions")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()

made = []
maker = threading.Thread(target=lambda: made.append(build()))
maker.start()
maker.join()
spark = made[0]
assert build() is spark
src = Path(sys.argv[1])
src.mkdir()
(src / "part-0.json").write_text('{"k": 1}\\n{"k": 2}\\n{"k": 1}\\n')
query = (spark.readStream.schema("k INT").json(str(src)).groupBy("k").agg(F.count("*"))
         .writeStream.format("noop").outputMode("update").queryName("hostile_counts")
         .option("checkpointLocation", sys.argv[2]).trigger(availableNow=True).start())
query.awaitTermination()
print("query ran", query.lastProgress["batchId"], flush=True)
started = time.monotonic()
spark.stop()
print("stopped within 5 s:", time.monotonic() - started < 5, flush=True)
spark = build(**{"spark.sparkwatch.push.url": "file:///etc/passwd"})
assert spark.range(3).count() == 3
spark.stop()
spark = build(**{"spark.sparkwatch.metrics.address": "x" * 1_000_000})
spark.stop()
sys.exit(3)
'''


@pytest.mark.spark
def test_a_held_port_a_history_it_cannot_open_and_sessions_refused_by_their_conf_leave_the_app_running_unslowed(  # noqa: E501
    tmp_path: Path,
) -> None:
    """The port and the history are one warning each and the listener runs on; the history's
    events are dropped and counted, and ``spark.stop()`` no longer waits out ten seconds of
    retries against it (nor the plan writes' backoff). The refused sessions are one line each,
    naming the conf key."""
    app, history = tmp_path / "app.py", tmp_path / "history.db"
    app.write_text(SESSIONS_APP)
    history.mkdir()  # a path SQLite cannot open, even as root
    holder = held_port()
    try:
        port = holder.getsockname()[1]
        env = clean_env(SPARKWATCH_METRICS_PORT=str(port),
                        SPARKWATCH_HISTORY_URL=f"sqlite:///{history}")
        done = subprocess.run(
            [*SPARKWATCH, "run", "--", sys.executable, str(app), str(tmp_path / "in"),
             str(tmp_path / "checkpoint")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    finally:
        holder.close()
    assert done.returncode == 3, done.stderr[-3000:]  # the app's own status
    assert done.stdout.splitlines() == ["query ran 0", "stopped within 5 s: True"]
    said = ours(done.stderr)
    port_taken, attached, *middle, refused_push, refused_address = said
    assert port_taken == (
        f"sparkwatch: metrics port {port} on 0.0.0.0 is already in use; choose another with "
        "SPARKWATCH_METRICS_PORT / spark.sparkwatch.metrics.port / metrics_port= (0 picks a free "
        "port); running without /metrics (history and push go on)")
    assert re.fullmatch(rf"sparkwatch \S+ attached to (\S+) \(jvm mode\): metrics off, "
                        rf"history sqlite:///{re.escape(str(history))}, push off",
                        attached), attached
    app_id = attached.split(" attached to ")[1].split()[0]
    unopened = f"cannot connect to sqlite:///{history}: unable to open database file"
    stopped = [line for line in middle if line.startswith("sparkwatch stopped")]
    assert sorted(line for line in middle if line not in stopped) == [
        f"sparkwatch: history write failed (attempt 1): {unopened}",
        f"sparkwatch: plan of {query_id(middle)} not written (1 in a row): {unopened}",
    ], middle
    # Every event dropped, but for any the writer still held at the stop's deadline (a loaded
    # machine): said unfinished, so the line accounts for each event received.
    counts = len(stopped) == 1 and re.fullmatch(
        rf"sparkwatch stopped for {app_id}: ([1-9]\d*) events received, (\d+) dropped"
        r"(?:, ([1-9]\d*) unfinished at the stop deadline)?", stopped[0])
    assert counts, stopped
    received, dropped, unfinished = (int(n or 0) for n in counts.groups())
    assert received == dropped + unfinished, stopped
    assert refused_push == (
        "sparkwatch: not attached: spark.sparkwatch.push.url=file:///etc/passwd: expected an "
        "http:// or https:// URL with a host (http://collector:9751/api/v1/events)")
    # A million characters quoted: cut to one line of a readable length, still naming the key
    # (the setting's quote is cut at 200 characters, before the announced line's own cut).
    assert refused_address.startswith(
        "sparkwatch: not attached: spark.sparkwatch.metrics.address='xxxxxxxx")
    assert refused_address.endswith("...: not an address or host name (too long, or characters "
                                    "no host name has)"), refused_address
    assert len(refused_address) < 2000


def query_id(lines: list[str]) -> str:
    """The query id a "plan of ... not written" line names."""
    found = [m.group(1) for line in lines if (m := re.match(r"sparkwatch: plan of (\S+) ", line))]
    return found[0] if found else "(no plan line)"


# Stops its session and builds it again; exits with its own status.
RESTART_APP = '''\
import sys
from pyspark.sql import SparkSession

for _ in range(2):
    spark = (SparkSession.builder.master("local[1]").appName("hostile-restart")
             .config("spark.ui.enabled", "false").getOrCreate())
    assert spark.range(5).count() == 5
    spark.stop()
print("ran", getattr(sys, "theirs_ran", 0), flush=True)
sys.exit(4)
'''


@pytest.mark.spark
def test_a_metrics_address_of_bytes_that_are_not_utf8_is_one_line_naming_it_however_often_the_app_builds_its_session(  # noqa: E501
    tmp_path: Path,
) -> None:
    """Under a nested `sparkwatch run`, with the user's sitecustomize on the path: the address
    (``os.environb``) failed the bind with a UnicodeError, said for each session without naming
    the variable."""
    app, theirs = tmp_path / "app.py", tmp_path / "theirs"
    app.write_text(RESTART_APP)
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text(THEIRS)
    env = {os.fsencode(k): os.fsencode(v) for k, v in clean_env(
        SPARKWATCH_METRICS_PORT="0", SPARKWATCH_HISTORY_URL="off", PYTHONPATH=str(theirs)).items()}
    env[b"SPARKWATCH_METRICS_ADDRESS"] = b"\xff\xfedriver"  # as os.environb can hold it
    done = subprocess.run(
        [*SPARKWATCH, "run", "--", *SPARKWATCH, "run", "--", sys.executable, str(app)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 4, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["ran 1"]  # their sitecustomize ran, once
    assert ours(done.stderr) == [
        "sparkwatch: not attached: SPARKWATCH_METRICS_ADDRESS='\\udcff\\udcfedriver': expected "
        "an address or host name, without spaces or control characters"]
