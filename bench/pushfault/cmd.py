"""Spark's batch pace with the push sink against a collector that hangs or answers 503 (issue 14).

One local Spark session runs the same stateful query three times, each for ``--seconds`` of
wall time: without a push sink; pushing to a server that accepts connections and never answers;
and pushing to a gate that answers 503 with ``Retry-After`` for the whole run, then forwards to
a real collector. Reported per run: batches, mean / median / p95 batch duration and their ratio
to the run without a sink; for the gate, whether every event within the sink's bound reached the
collector once it answered.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.ingest.collector import collector, sample
from bench.local import QuietHandler
from bench.machine import describe
from bench.sparkenv import start_session
from bench.workload import windowed_count

APP = "bench-pushfault"
MIN_MEASURED = 2
MEASURED_DEADLINE_SECONDS = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=60.0, help="wall time of each run")
    parser.add_argument("--trigger-ms", type=int, default=500, help="the query's trigger")
    parser.add_argument("--rows", type=int, default=2000, help="rows per batch")
    parser.add_argument("--push-timeout", type=float, default=2.0,
                        help="the sink's connect/read timeout (push.timeoutSeconds)")


def main(ns: argparse.Namespace, argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-pushfault-") as tmp:
        work = Path(tmp)
        spark = start_session(APP, tmp)
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
        rows = []
        try:
            _run(spark, ns, work, "warmup", None, seconds=max(ns.seconds / 4, 5.0))  # JIT
            rows.append(("no push sink", _run(spark, ns, work, "none", None)))
            with _silent_server() as url:
                rows.append(("collector accepts and never answers", _run(spark, ns, work,
                                                                          "hang", url)))
            with collector(f"sqlite:///{work}/history.db", work, APP, 10) as running, \
                    _gate(running.url) as gate:
                measured = _run(spark, ns, work, "gate", gate.url, running.token)
                gate.open = True
                measured["delivered"] = _delivered(running, measured.pop("attachment"))
                rows.append((f"collector answers 503 for {ns.seconds:g} s", measured))
        finally:
            spark.stop()
    _report(ns, argv, rows)
    return 0


def _run(spark: Any, ns: argparse.Namespace, work: Path, name: str, url: str | None,
         token: str | None = None, seconds: float | None = None) -> dict[str, Any]:
    import sparkwatch

    push = {"push_url": url, "push_token": token or "t", "push_timeout_seconds": ns.push_timeout,
            "push_retry_max_seconds": 5.0} if url else {}
    att = sparkwatch.attach(spark, metrics_port=0, history_url="off", **push)
    query = (windowed_count(spark, ns.rows, ns.trigger_ms).writeStream.format("noop")
             .outputMode("append").queryName(f"pushfault_{name}")
             .option("checkpointLocation", str(work / f"ckpt-{name}"))
             .trigger(processingTime=f"{ns.trigger_ms} milliseconds").start())
    try:
        # A fixed wall-time window is what is measured, not a wait for a condition; but a
        # loaded machine may not finish a batch past batch 0 in a short one: then the run goes on
        # until it has (within a deadline) rather than report nothing.
        query.awaitTermination(seconds or ns.seconds)
        deadline = time.monotonic() + MEASURED_DEADLINE_SECONDS
        while len(_measured(query)) < MIN_MEASURED and time.monotonic() < deadline:
            query.awaitTermination(0.25)
    finally:
        query.stop()
    progress = _measured(query)
    durations = [p.batchDuration / 1000.0 for p in progress] or [float("nan")]
    measured: dict[str, Any] = {
        "batches": len(progress), "mean": statistics.fmean(durations),
        "median": statistics.median(durations),
        "p95": statistics.quantiles(durations, n=20)[-1] if len(durations) > 1 else durations[0]}
    if name == "gate":
        measured["attachment"] = att  # still pushing: delivery is measured once the gate opens
    else:
        att.detach(timeout=1.0)
    return measured


def _measured(query: Any) -> list[Any]:
    return [p for p in query.recentProgress if p.batchId > 0]  # batch 0 warms up


def _delivered(running: Any, att: Any) -> str:
    """Events the collector accepted of those the listener received, once the gate opened
    (polled with a deadline: the sink waits out its Retry-After first)."""
    received = sum(att.counters.received.values())
    deadline, accepted = time.monotonic() + 120, 0.0
    while time.monotonic() < deadline and accepted < received:
        accepted = sample(running.self_metrics(), "sparkwatch_collector_events_accepted_total")
        time.sleep(0.5)
    att.detach(timeout=5.0)
    return f"{int(accepted)} of {received}"


@contextlib.contextmanager
def _silent_server() -> Iterator[str]:
    """Accepts connections and reads, never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/api/v1/events"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        server.close()


class _Gate(http.server.ThreadingHTTPServer):
    open = False
    target = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api/v1/events"


class _GateHandler(QuietHandler):
    server: _Gate

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if not self.server.open:
            self.answer(503, b"", headers={"Retry-After": "1"})
            return
        request = urllib.request.Request(self.server.target + "/api/v1/events", data=body,
                                         method="POST", headers=dict(self.headers))
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - localhost
            self.answer(answer.status, answer.read())


@contextlib.contextmanager
def _gate(target: str) -> Iterator[_Gate]:
    gate = _Gate(("127.0.0.1", 0), _GateHandler)
    gate.target = target
    thread = threading.Thread(target=gate.serve_forever, daemon=True)
    thread.start()
    try:
        yield gate
    finally:
        gate.shutdown()
        gate.server_close()


def _report(ns: argparse.Namespace, argv: list[str], rows: list[tuple[str, dict[str, Any]]]
            ) -> None:
    base = rows[0][1]
    print(f"- command: `python -m bench {' '.join(argv)}`")
    m, now = describe(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"- machine: {m['nproc']} CPUs ({m['cpu']}), {m['ram']}, Python {m['python']}, "
          f"Java {m['java']}; code `{m['code']}`; date {now}")
    print(f"- query: rate-micro-batch {ns.rows} rows per {ns.trigger_ms} ms trigger, windowed "
          f"count with watermark; {ns.seconds:g} s per run; batch 0 left out")
    print()
    print("| push sink | batches | mean s | median s | p95 s | mean vs no sink | delivered |")
    print("|---|---|---|---|---|---|---|")
    for name, m in rows:
        print(f"| {name} | {m['batches']} | {m['mean']:.3f} | {m['median']:.3f} | "
              f"{m['p95']:.3f} | {m['mean'] / base['mean']:.2f}× | {m.get('delivered', '–')} |")
