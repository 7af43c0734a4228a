"""Run the demo: Spark, the sparkwatch listener, the queries, the live table, then a clean stop."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sparkwatch.demo import queries as dq
from sparkwatch.demo.stopping import stop_all
from sparkwatch.demo.supervisor import Supervisor
from sparkwatch.demo.table import render
from sparkwatch.demo.waiting import wait_until
from sparkwatch.httpopen import url_host
from sparkwatch.interrupts import not_ignored
from sparkwatch.summary import one_line
from sparkwatch.terminal import Screen, clip, fmt_seconds, run_live

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sparkwatch.listener.attach import Attachment

# Measured with all eight queries on two cores: about 0.6 core at a 3 s trigger (230 CPU-ms per
# micro-batch); a 2 s trigger would ask for about 0.9 and leave little for a loaded machine.
TRIGGER_SECONDS = 3.0
SHUTDOWN_SECONDS = 10.0
# How long a stream-stream join's stop waits for a gap between its batches (the other queries
# are stopped at once, see sparkwatch/demo/stopping.py). On a loaded machine every query
# overruns its trigger, so batches run back to back until the first queries stop and the rest
# speed up; a stop that cannot wait interrupts a batch, which Spark 4.x can end with a wrapped
# interrupt (InvocationTargetException) that it reports as a failed run.
STOP_GAP_SECONDS = 25.0
# The longest the clean stop takes before Spark's own stop: the query start in flight, each
# query's wait for its gap, then the three writing steps (terminations, the listener's drain, its
# detach), each bounded by SHUTDOWN_SECONDS.
STOP_BOUND_SECONDS = STOP_GAP_SECONDS + 4 * SHUTDOWN_SECONDS


class DemoError(Exception):
    """The demo cannot start; the message says why, in one line."""


@dataclass(frozen=True, slots=True)
class DemoOptions:
    port: int
    history_url: str | None
    state_store: str = "rocksdb"
    rows_per_second: int = 10
    duration: float | None = None
    checkpoint_dir: Path | None = None
    trigger_seconds: float = TRIGGER_SECONDS
    redraw_seconds: float = 1.0
    metrics_host: str = "127.0.0.1"


@dataclass(slots=True)
class Progress:
    """When every demo query first showed its state operators (the demo's time-to-first-rows)."""

    expected: frozenset[str]
    started_at: float
    all_reporting_after: float | None = None

    def update(self, reporting: set[str], now: float) -> None:
        if self.all_reporting_after is None and self.expected <= reporting:
            self.all_reporting_after = now - self.started_at


def reporting_queries(att: Attachment) -> set[str]:
    with att.state.read() as (_, states):
        return {q.name for q in states if q.last_progress and q.last_progress.state_operators}


def header(opts: DemoOptions, att: Attachment, progress: Progress, reporting: int,
           notes: list[str], elapsed: float) -> list[str]:
    total = f" / {fmt_seconds(opts.duration)}" if opts.duration else ""
    n_queries = len(progress.expected)
    stats = att.stats()
    received = sum(stats.received.values())
    dropped = sum(stats.dropped.values())
    ready = (
        f"all {n_queries} queries reporting state after {progress.all_reporting_after:.1f}s"
        if progress.all_reporting_after is not None
        else f"{reporting} of {n_queries} queries reporting state"
    )
    lines = [
        f"sparkwatch demo   {fmt_seconds(elapsed)}{total}   Ctrl-C stops",
        f"{n_queries} queries on local[2], {opts.state_store} state store, "
        f"{opts.rows_per_second} rows/s per source, trigger {opts.trigger_seconds:g}s",
        f"console: {console_url(opts, att)}   metrics: {metrics_url(opts, att)}   "
        f"history: {history_text(opts.history_url)}",
        f"listener: {stats.mode} mode, {received} events received, {dropped} dropped - {ready}",
    ]
    lines.extend(notes[-3:])
    return [*lines, ""]


def console_url(opts: DemoOptions, att: Attachment) -> str:
    """The browser console, served beside /metrics (sparkwatch/console)."""
    port = att.metrics_port
    return f"http://{url_host(opts.metrics_host)}:{port}/" if port else "off"


def metrics_url(opts: DemoOptions, att: Attachment) -> str:
    port = att.metrics_port
    return f"http://{url_host(opts.metrics_host)}:{port}/metrics" if port else "off"


def history_text(url: str | None) -> str:
    if not url:
        return "off"
    from sparkwatch.history.engine import describe_url

    return describe_url(url)


@dataclass(slots=True)
class StopRequest:
    """The demo's stop: asked for by --duration's end or by the first SIGINT/SIGTERM."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int | None = None
    """the first signal received, which decides the exit status (128 + its number)"""

    def exit_status(self) -> int:
        return 0 if self.signum is None else 128 + self.signum


STILL_STOPPING = (f"sparkwatch demo: stopping the queries (at most {STOP_GAP_SECONDS:g}s) and "
                  f"writing the history (each step at most {SHUTDOWN_SECONDS:g}s); SIGKILL ends it "
                  f"at once\n").encode()


@contextmanager
def stop_on_signals(stop: StopRequest) -> Iterator[None]:
    """From Spark started to Spark stopped, Ctrl-C and SIGTERM ask for the clean stop (queries
    stopped, their ends written to the history, then Spark stopped). PySpark's own SIGINT handler
    would cancel every running job, failing the queries instead, and a second signal must not cut
    the stop short: it would leave runs "running" in the history. The stop is bounded, so a
    signal during it is only noted."""

    def handler(signum: int, frame: Any) -> None:
        if stop.signum is not None:
            with suppress(OSError):  # os.write: a handler can run in the middle of a print
                os.write(2, STILL_STOPPING)
            return
        stop.signum = signum
        stop.event.set()

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in not_ignored()}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def run_demo(
    opts: DemoOptions, out: TextIO, screen: Screen | None = None, began: float | None = None
) -> int:
    """The whole demo; raises :class:`DemoError` when it cannot start. ``began`` (a monotonic
    time) is when the demo started, for ``--duration`` and the time-to-first-rows. Returns the
    exit status: 0, or 128 + the number of the signal that stopped it."""
    from sparkwatch.demo.session import spark_version

    began = time.monotonic() if began is None else began
    log = spark_log()
    print(f"starting Spark (local[2], {opts.state_store} state store; its own output goes to "
          f"{log})...", file=out, flush=True)
    stop = StopRequest()
    spark = start_spark(opts.state_store, log)
    with stop_on_signals(stop):
        try:
            att = attach(spark, opts)
            chosen = dq.available(spark_version(spark))
            with checkpoint_root(opts.checkpoint_dir) as root:
                cfg = dq.DemoConfig(root, opts.rows_per_second, opts.trigger_seconds)
                supervisor = Supervisor(spark, cfg, chosen)
                progress = Progress(frozenset(q.name for q in chosen), began)
                live(opts, att, supervisor, progress, screen or Screen(out), began, stop.event)
                shut_down(spark, att, supervisor, out, opts.trigger_seconds)
            print(render_final(att, progress), file=out, flush=True)
        finally:
            spark.stop()
    return stop.exit_status()


def spark_log() -> Path:
    """A new file for the output of the demo's JVM, kept after the demo for its errors."""
    fd, name = tempfile.mkstemp(prefix="sparkwatch-demo-spark-", suffix=".log")
    os.close(fd)
    return Path(name)


def start_spark(state_store: str, log: Path) -> SparkSession:
    from sparkwatch.demo.session import build_session, jvm_output_to

    # A signal while Spark starts interrupts the start (sparkwatch.cli.main's handler, which
    # then ends the JVM half-way up): there is no query yet to stop.
    try:
        with jvm_output_to(log):
            return build_session(state_store)
    except Exception as exc:  # noqa: BLE001 - no Java, no free port for the driver, ...
        # Why the JVM did not come up (no JAVA_HOME, a bad option) is in its output, not in
        # PySpark's exception.
        said = [line.strip() for line in log.read_text(errors="replace").splitlines()]
        last = " | ".join([line for line in said if line][-3:])
        detail = f" (Spark said: {clip(last, 400)})" if last else ""
        raise DemoError(f"could not start Spark: {one_line(exc)}{detail}; log: {log}") from None


def attach(spark: SparkSession, opts: DemoOptions) -> Attachment:
    import sparkwatch
    from sparkwatch.listener.exporter import ExporterError

    try:
        return sparkwatch.attach(spark, metrics_port=opts.port, history_url=opts.history_url)
    except ExporterError as exc:
        raise DemoError(str(exc)) from None


@contextmanager
def checkpoint_root(given: Path | None) -> Iterator[Path]:
    """The user's checkpoint directory (kept: queries resume from it), or a temporary one."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    root = Path(tempfile.mkdtemp(prefix="sparkwatch-demo-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def live(opts: DemoOptions, att: Attachment, supervisor: Supervisor, progress: Progress,
         screen: Screen, began: float, stop: threading.Event) -> None:
    def frame(width: int, height: int | None) -> list[str]:
        now = time.monotonic()
        reporting = reporting_queries(att)
        progress.update(reporting, now)
        top = header(opts, att, progress, len(reporting), supervisor.notes, now - began)
        with att.state.read() as (apps, states):
            table = render(apps, states, width, color=screen.tty,
                           height=None if height is None else max(3, height - len(top) - 1))
        # The header is plain text: clip it, a wrapped line would shift the in-place redraw.
        return [clip(text, width) for text in top] + table.splitlines()

    # --duration is the whole demo's run time, Spark's start-up included (not the shutdown).
    deadline = None if opts.duration is None else began + opts.duration
    if not stop.is_set():  # stopped while Spark started: no query to start
        supervisor.start()
    try:
        run_live(frame, screen, stop, interval=opts.redraw_seconds, deadline=deadline)
    finally:
        # Ctrl-C can land between two redraws, after the last query reported.
        progress.update(reporting_queries(att), time.monotonic())
        screen.close()


def shut_down(spark: SparkSession, att: Attachment, supervisor: Supervisor, out: TextIO,
              trigger_seconds: float) -> None:
    print("stopping queries...", file=out, flush=True)
    started = supervisor.finish(SHUTDOWN_SECONDS)
    # A stop can still catch a batch in flight (one that overran its trigger), which Spark logs as
    # ERRORs with a stack trace per task: noise for a deliberate stop. Real failures show below.
    spark.sparkContext.setLogLevel("OFF")
    for error in stop_all(started, trigger_seconds, STOP_GAP_SECONDS,
                          supervisor.interruptible):
        print(f"warning: could not stop {error}", file=out, flush=True)
    # stop() returns before Spark's listener bus has delivered the terminations: wait for them,
    # then for the listener to export and write everything.
    names = {q.name for q in started}
    wait_until(lambda: not names & active_queries(att), SHUTDOWN_SECONDS)
    if not att.flush(SHUTDOWN_SECONDS):
        print(f"warning: listener did not drain within {SHUTDOWN_SECONDS:g}s", file=out, flush=True)
    att.detach(SHUTDOWN_SECONDS)


def active_queries(att: Attachment) -> set[str]:
    with att.state.read() as (_, states):
        return {q.name for q in states if q.active}


def render_final(att: Attachment, progress: Progress) -> str:
    width = shutil.get_terminal_size((120, 40)).columns
    with att.state.read() as (apps, states):
        table = render(apps, states, width)
    stats = att.stats()
    ready = (
        f"all queries reported state {progress.all_reporting_after:.1f}s after start"
        if progress.all_reporting_after is not None
        else "not every query reported state"
    )
    return (
        f"\nfinal state:\n{table}\n\n{ready}; listener received "
        f"{sum(stats.received.values())} events, dropped {sum(stats.dropped.values())}"
    )

