"""`sparkwatch demo`: the live table on real progress samples, the CLI's up-front errors, and (slow,
marked spark) the whole demo as a subprocess with its /metrics scraped while it runs."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import IO, Any

import pytest

from bench.local import free_port
from sparkwatch.cli.main import main
from sparkwatch.demo import queries as dq
from sparkwatch.demo.runner import STOP_BOUND_SECONDS
from sparkwatch.demo.table import render
from sparkwatch.demo.waiting import wait_until
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import AppInfo, Envelope, EventKind
from sparkwatch.model.parse import parse_envelope
from sparkwatch.terminal import (
    CLEAR_EOL,
    CLEAR_EOS,
    CLEAR_SCREEN,
    HOME,
    Screen,
    fmt_bytes,
    fmt_count,
    fmt_seconds,
    run_live,
)
from tests.conftest import DEMOS
from tests.support import state_series

SAMPLES = Path(__file__).resolve().parent / "fixtures" / "spark-4.3.0"
APP = AppInfo("sparkwatch-demo", "local-1", "4.3.0")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def feed(state: MetricState, kind: EventKind, payload: dict[str, Any]) -> None:
    state.apply(parse_envelope(Envelope(kind, APP, 0.0, payload)))


def sample_state(*names: str, terminate: bool = False) -> tuple[MetricState, list[dict[str, Any]]]:
    """A state fed with recorded runs (started, every progress, optionally terminated)."""
    state, samples = MetricState(), []
    for name in names:
        sample = json.loads((SAMPLES / f"{name}.json").read_text())
        feed(state, EventKind.STARTED, sample["started"])
        for progress in sample["progress"]:
            feed(state, EventKind.PROGRESS, progress)
        if terminate:
            feed(state, EventKind.TERMINATED, sample["terminated"])
        samples.append(sample)
    return state, samples


def rendered(state: MetricState, width: int = 160, **kwargs: Any) -> str:
    with state.read() as (apps, queries):
        return render(apps, queries, width, **kwargs)


def row(text: str, name: str) -> list[str]:
    """The cells of the row whose name column is ``name``."""
    for line in text.splitlines():
        if line.startswith(name + "  "):
            return line[len(name):].split()
    raise AssertionError(f"no row {name!r} in:\n{text}")


ROCKSDB_SAMPLES = sorted(p.stem for p in SAMPLES.glob("*_rocksdb.json"))


@pytest.mark.parametrize("name", ROCKSDB_SAMPLES)
def test_every_operator_row_shows_the_last_progress(name: str) -> None:
    state, (sample,) = sample_state(name)
    text = rendered(state)
    last = sample["progress"][-1]
    assert row(text, last["name"])[:2] == ["active", str(last["batchId"])]
    assert last["stateOperators"], "samples of stateful queries have operators"
    for index, op in enumerate(last["stateOperators"]):
        dropped = sum(
            p["stateOperators"][index]["numRowsDroppedByWatermark"] for p in sample["progress"]
        )
        cells = row(text, f"  #{index} {op['operatorName']}")
        assert cells == [
            fmt_count(op["numRowsTotal"]),
            fmt_count(op["numRowsUpdated"]),
            fmt_count(op["numRowsRemoved"]),
            fmt_count(dropped),
            *fmt_bytes(op["memoryUsedBytes"]).split(),
            fmt_seconds(op["commitTimeMs"] / 1000),
        ]


def test_query_row_shows_rates_duration_and_watermark_lag() -> None:
    state, (sample,) = sample_state("window_agg_rocksdb")
    last = sample["progress"][-1]
    cells = row(rendered(state), last["name"])
    rates = [last["inputRowsPerSecond"], last["processedRowsPerSecond"]]
    assert cells[2:4] == [f"{r:.1f}" for r in rates]
    assert cells[4] == fmt_seconds(last["batchDuration"] / 1000)
    with state.read() as (_, queries):
        p = queries[0].last_progress
        assert p is not None and p.event_time.watermark
        assert cells[5] == fmt_seconds(p.timestamp - p.event_time.watermark)


def test_batch_zero_has_no_watermark_lag() -> None:
    state, (sample,) = MetricState(), [json.loads((SAMPLES / "dedupe_hdfs.json").read_text())]
    first = sample["progress"][0]
    assert first["batchId"] == 0 and first["eventTime"]["watermark"].startswith("1970")
    feed(state, EventKind.PROGRESS, first)
    assert row(rendered(state), first["name"])[-1] == "-"


def test_rows_are_sorted_and_every_sample_fits() -> None:
    state, samples = sample_state(*ROCKSDB_SAMPLES)
    text = rendered(state)
    names = [s["progress"][-1]["name"] for s in samples]
    positions = [text.index("\n" + n + " ") for n in sorted(names)]
    assert positions == sorted(positions)


@pytest.mark.parametrize("width", [10, 20, 30, 50, 72, 80, 100, 132, 200])
def test_no_line_is_wider_than_the_terminal(width: int) -> None:
    state, _ = sample_state(*ROCKSDB_SAMPLES)
    feed(state, EventKind.STARTED, {"id": "q-new", "runId": "r-new", "name": "fresh",
                                    "timestamp": "2026-11-21T10:00:00.000Z"})
    for color in (False, True):
        for height in (None, 8):
            for line in rendered(state, width, color=color, height=height).splitlines():
                assert len(ANSI.sub("", line)) <= width, line
    assert len(render([], [], width).splitlines()[-1]) <= width


def test_height_limit_keeps_the_frame_on_screen() -> None:
    state, _ = sample_state(*ROCKSDB_SAMPLES)
    lines = rendered(state, height=10).splitlines()
    assert len(lines) == 10 and "more lines" in lines[-1]


def test_statuses_and_failure_line() -> None:
    state, samples = sample_state("dedupe_rocksdb", "limit_rocksdb")
    dedupe, limit = (s["started"] for s in samples)
    feed(state, EventKind.IDLE, {"id": dedupe["id"], "runId": dedupe["runId"],
                                 "timestamp": "2026-11-21T10:00:00.000Z"})
    feed(state, EventKind.TERMINATED, {"id": limit["id"], "runId": limit["runId"],
                                       "exception": "SparkException: boom\n\tat x.y",
                                       "errorClassOnException": None})
    feed(state, EventKind.STARTED, {"id": "q-new", "runId": "r-new", "name": "fresh",
                                    "timestamp": "2026-11-21T10:00:00.000Z"})
    text = rendered(state)
    assert row(text, dedupe["name"])[0] == "idle"
    assert row(text, limit["name"])[0] == "failed"
    assert "  ! SparkException: boom" in text and "at x.y" not in text
    assert row(text, "fresh")[0] == "active"
    assert "(waiting for the first batch)" in text
    assert "1 active, 1 failed, 1 idle" in text.splitlines()[0]


def test_terminated_queries_keep_their_last_state() -> None:
    state, (sample,) = sample_state("join_rocksdb", terminate=True)
    text = rendered(state)
    assert row(text, sample["started"]["name"])[0] == "terminated"
    assert "#0 symmetricHashJoin" in text


def test_empty_state() -> None:
    assert "(no streaming queries yet)" in render([], [], 80)


def test_formatting() -> None:
    assert [fmt_bytes(n) for n in (0, 1023, 1024, 30_212, 171_744, 5 * 2**20)] == [
        "0 B", "1023 B", "1.0 KiB", "29.5 KiB", "168 KiB", "5.0 MiB"]
    assert [fmt_seconds(s) for s in (None, 0.238, 7.72, 185, 7400)] == [
        "-", "238ms", "7.7s", "3m05s", "2h03m"]
    assert [fmt_count(n) for n in (None, 0, 999_999, 1_234_567, 3_000_000_000)] == [
        "-", "0", "999999", "1.23M", "3G"]


# --- drawing --------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_pipe_gets_a_snapshot_every_few_seconds() -> None:
    out, clock = io.StringIO(), FakeClock()
    screen = Screen(out, tty=False, snapshot_every=5.0, clock=clock)
    assert screen.show(["a"]) is True
    clock.now = 4.9
    assert screen.show(["b"]) is False
    clock.now = 5.0
    assert screen.show(["c"]) is True
    assert "\x1b" not in out.getvalue()
    assert [line for line in out.getvalue().splitlines() if not line.startswith("---")] == [
        "a", "c"]


def test_terminal_is_redrawn_in_place_without_clearing() -> None:
    out = io.StringIO()
    screen = Screen(out, tty=True)
    screen.show(["one", "two"])
    first = out.getvalue()
    screen.show(["three"])
    second = out.getvalue()[len(first):]
    assert first.count(CLEAR_SCREEN) == 1
    # Later frames only move home and overwrite: blanking the screen first is what flickers.
    assert CLEAR_SCREEN not in second and second.startswith(HOME)
    assert second == f"{HOME}three{CLEAR_EOL}{CLEAR_EOS}"


def test_a_frame_as_tall_as_the_terminal_never_scrolls_it() -> None:
    out = io.StringIO()
    Screen(out, tty=True).show([f"line {i}" for i in range(24)])
    # 24 lines need 23 line feeds: a 24th on the bottom row would scroll the screen a line.
    assert out.getvalue().count("\n") == 23


def test_run_live_stops_at_the_deadline_and_on_stop() -> None:
    clock, frames = FakeClock(), []

    def frame(width: int, height: int | None) -> list[str]:
        frames.append(width)
        clock.now += 1.0
        return ["x"]

    screen = Screen(io.StringIO(), tty=False, snapshot_every=0.0)
    run_live(frame, screen, threading.Event(), interval=0.0, deadline=3.0, clock=clock)
    assert len(frames) == 3
    stop = threading.Event()
    stop.set()
    run_live(frame, screen, stop, interval=10.0)
    assert len(frames) == 4


# --- queries ----------------------------------------------------------------------------------


def test_one_query_per_operator_kind_and_one_skewed() -> None:
    healthy = [q.operator for q in dq.QUERIES if q.name != "skewed_keys"]
    assert len(set(healthy)) == len(healthy) == 8
    [skewed] = [q for q in dq.QUERIES if q.name == "skewed_keys"]
    assert skewed.operator == "symmetricHashJoin" and dict(skewed.conf)
    on_35 = {q.name: q.operator_on((3, 5)) for q in dq.available((3, 5))}
    assert "transform_with_state_in_pandas" not in on_35
    assert on_35["session_window"] == "defaultName"
    assert len(dq.available((4, 3))) == 9


class FakeQuery:
    def __init__(self, name: str, fails: bool) -> None:
        self.name, self.isActive = name, not fails
        error = RuntimeError("Python worker failed to connect back.\n\tat x")
        self._error = error if fails else None

    def exception(self) -> Exception | None:
        return self._error


def test_supervisor_restarts_a_failed_query_at_most_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkwatch.demo.supervisor import Supervisor

    starts: list[str] = []

    def fake_start(spark: Any, query: dq.DemoQuery, cfg: dq.DemoConfig) -> FakeQuery:
        starts.append(query.name)
        if query.name == "dedupe":
            raise ValueError("bad plan")
        return FakeQuery(query.name, fails=query.name == "window_agg")

    monkeypatch.setattr(dq, "start", fake_start)
    chosen = [q for q in dq.QUERIES if q.name in ("window_agg", "dedupe", "global_limit")]
    no_spark: Any = None
    supervisor = Supervisor(no_spark, dq.DemoConfig(Path(".")), chosen, check_seconds=0.01)
    supervisor.start()
    assert wait_until(lambda: starts.count("window_agg") == 3, timeout=10)
    running = supervisor.finish(timeout=10)
    assert starts.count("window_agg") == 3 and starts.count("global_limit") == 1
    assert sorted(q.name for q in running) == ["global_limit", "window_agg"]
    assert supervisor.notes == [
        "could not start dedupe: bad plan",
        "restarted window_agg (1/2) after: Python worker failed to connect back.",
        "restarted window_agg (2/2) after: Python worker failed to connect back.",
    ]


# --- CLI errors (all raised before Spark starts) -------------------------------------------------


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("0.0.0.0", 0))
        sock.listen()
        yield sock.getsockname()[1]


def test_port_taken_is_reported_before_spark_starts(
    taken_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--port", str(taken_port), "--history-url", "off"]) == 2
    err = capsys.readouterr().err
    assert f"port {taken_port} is already in use" in err and "--port" in err


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"postgresql://sparkwatch@127.0.0.1:{free_port()}/history", "cannot connect"),
        ("not a url", "not a database URL"),
        ("mysql://u@localhost/db", "unsupported database"),
        ("sqlite:////nonexistent-dir/sub/history.db",
         "no folder /nonexistent-dir/sub for the SQLite file"),
    ],
    # ids fixed: the closed port differs from one collection to the next (pytest-xdist's
    # workers must collect the same names)
    ids=["closed-port", "not-a-url", "mysql", "missing-directory"],
)
def test_unusable_history_url_is_reported_before_spark_starts(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--port", "0", "--history-url", url]) == 2
    err = capsys.readouterr().err
    assert "sparkwatch demo: error: --history-url:" in err and message in err


def test_the_jvm_started_in_the_block_writes_to_the_log_and_the_demo_to_the_terminal(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """What a process started inside ``jvm_output_to`` prints (as the JVM, and the Python
    workers Spark starts, do) lands in the log; the demo's own output is back on the terminal."""
    import subprocess

    from sparkwatch.demo.session import jvm_output_to

    log = tmp_path / "spark.log"
    with jvm_output_to(log):
        subprocess.run(["sh", "-c", "echo from-jvm-stdout; echo from-jvm-stderr >&2"], check=True)
    print("table line")
    subprocess.run(["sh", "-c", "echo later-child >&2"], check=True)
    out, err = capfd.readouterr()
    assert log.read_text().split() == ["from-jvm-stdout", "from-jvm-stderr"]
    assert out == "table line\n" and err == "later-child\n"


@pytest.mark.spark
def test_spark_that_cannot_start_is_reported_with_what_it_said(tmp_path: Path) -> None:
    """No Java where JAVA_HOME points: the error names the JVM's own complaint (only in its
    output, which the demo keeps off the terminal) and the log it went to."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    done = subprocess.run(
        [sys.executable, "-m", "sparkwatch.cli.main", "demo", "--port", "0", "--history-url",
         "off", "--duration", "30"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (error,) = done.stderr.splitlines()
    assert error.startswith("sparkwatch demo: error: could not start Spark: ")
    assert f"{tmp_path / 'no-java'}/bin/java: No such file or directory" in error
    log = Path(error.rpartition("; log: ")[2])
    assert "No such file or directory" in log.read_text()
    log.unlink()


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "70000"],
        ["--port", "http"],
        ["--duration", "0"],
        ["--duration", "soon"],
        ["--rows-per-second", "0"],
        ["--rows-per-second", "5000"],
        ["--state-store", "memory"],
    ],
)
def test_bad_arguments(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["demo", *args])
    assert exit_info.value.code == 2
    assert "sparkwatch demo: error: argument" in capsys.readouterr().err


def test_history_url_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    from sparkwatch.cli.demo import history_url
    from sparkwatch.cli.main import build_parser
    from sparkwatch.settings import DEFAULT_HISTORY_URL

    def resolved(*argv: str) -> str | None:
        return history_url(build_parser().parse_args(["demo", *argv]).history_url)

    monkeypatch.delenv("SPARKWATCH_HISTORY_URL", raising=False)
    assert resolved() == DEFAULT_HISTORY_URL
    assert resolved("--history-url", "off") is None
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", "sqlite:///x.db")
    assert resolved() == "sqlite:///x.db"
    assert resolved("--history-url", "sqlite:///y.db") == "sqlite:///y.db"
    monkeypatch.setenv("SPARKWATCH_HISTORY_URL", "off")
    assert resolved() is None


# --- end to end (slow: its own Spark JVM and eight queries) ---------------------------------------

# Deadlines, not run lengths: the test moves on as soon as every operator shows. Generous, as
# the suite's second worker (pytest-xdist) shares the two cores meanwhile.
E2E_METRICS_SECONDS = 120.0
DEMO_NOTICE = re.compile(r"restarted \S+ \(\d/\d\) after: |\s+! ")
"""The demo's own lines that may quote Spark's error: a restart notice, a failed query's error."""
E2E_EXIT_SECONDS = STOP_BOUND_SECONDS + 20.0  # the demo's bounded stop, then Spark's



@contextlib.contextmanager
def demo_process(command: list[str], out: IO[str] | int,
                 err: IO[str]) -> Iterator[subprocess.Popen[str]]:
    """The demo ``command`` on a 160-column terminal's width, killed if the test leaves it
    running."""
    proc = subprocess.Popen(command, stdout=out, stderr=err, text=True,
                            env={**os.environ, "COLUMNS": "160"})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def stop_with_ctrl_c(proc: subprocess.Popen[str], err_path: Path) -> None:
    proc.send_signal(signal.SIGINT)
    # 130: stopped by Ctrl-C, cleanly (sparkwatch/cli/signals.py)
    assert proc.wait(E2E_EXIT_SECONDS) == 130, err_path.read_text()[-3000:]


def operators_in_metrics(port: int) -> set[str]:
    """Operator names with a ``spark_streaming_state_rows`` sample; empty while nothing serves."""
    return {labels["operator"]
            for labels, _ in state_series(f"http://127.0.0.1:{port}/metrics")}


@DEMOS
@pytest.mark.spark
@pytest.mark.timeout(240)
def test_demo_end_to_end(tmp_path: Path, promtool: str) -> None:
    """The demo serves every operator kind on /metrics while it runs, in an exposition promtool
    accepts, stops cleanly on Ctrl-C and prints every query with its operator."""
    import time

    pyspark = pytest.importorskip("pyspark")
    major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    version = (major, minor)
    expected = {q.name: q.operator_on(version) for q in dq.available(version)}
    port = free_port("0.0.0.0")
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    command = [
        sys.executable, "-m", "sparkwatch.cli.main", "demo", "--duration", "85",
        "--port", str(port), "--history-url", f"sqlite:///{tmp_path / 'history.db'}",
    ]
    # Files, not pipes: a full pipe would block the demo's writes while the test polls /metrics.
    with out_path.open("w") as out, err_path.open("w") as err, \
            demo_process(command, out, err) as proc:
        deadline = time.monotonic() + E2E_METRICS_SECONDS
        seen: set[str] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            seen = operators_in_metrics(port)
            if set(expected.values()) <= seen:
                break
            time.sleep(1.0)
        assert set(expected.values()) <= seen, (
            f"/metrics lacks state rows of {sorted(set(expected.values()) - seen)}\n"
            + err_path.read_text()[-3000:]
        )
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            exposition = response.read().decode()
        check = subprocess.run(
            [promtool, "check", "metrics"], input=exposition, capture_output=True, text=True
        )
        problems = (check.stdout + check.stderr).strip()
        assert check.returncode == 0 and not problems, f"promtool check metrics: {problems}"
        stop_with_ctrl_c(proc, err_path)
    output = out_path.read_text()
    final = output[output.index("final state:"):]
    for name, operator in expected.items():
        assert name in final and f"#0 {operator}" in final
        assert re.search(rf"^{name}\s+terminated\b", final, re.MULTILINE), final
    assert "all queries reported state" in final
    errors = err_path.read_text()
    assert "Traceback" not in errors
    # Spark's own output (its log4j banner, the Python workers' prints) is in the log the first
    # line names, not torn through the table.
    log = Path(re.search(r"its own output goes to (\S+)\)", output)[1])  # type: ignore[index]
    assert "log4j" in log.read_text() and "log4j" not in errors
    # A query the demo restarted (its new Python worker missed Spark's fixed 10 s to connect back
    # on a loaded machine, tests/test_console_browser.py's WORKER_LATE) is told in the demo's own
    # lines: its restart notice and its failed row's error; no other line is Spark's.
    assert [line for line in (output + errors).splitlines()
            if "Python worker" in line and not DEMO_NOTICE.match(line)] == []
    log.unlink()
    with closing(sqlite3.connect(tmp_path / "history.db")) as db:
        statuses = {status for (status,) in db.execute("select status from query_runs")}
    assert statuses and "running" not in statuses, statuses  # no ghost left running


@DEMOS
@pytest.mark.spark
def test_demo_piped_into_head_ends_quietly(tmp_path: Path) -> None:
    """`sparkwatch demo | head`: the reader leaves after a few lines; the demo stops Spark and
    exits 0 without a traceback."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkwatch.cli.main", "demo", "--duration", "60",
         "--history-url", "off", "--port", "0"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines = [proc.stdout.readline() for _ in range(3)]  # what `head -3` reads
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err[-2000:]
    assert lines[0].startswith("starting Spark") and "Traceback" not in err
