"""One benchmark run in its own process: start Spark, register listener(s), run, count, report.

Invoked by the parent as ``python -m bench.listener.child '<RunConfig JSON>'``; writes a JSON
result to ``RunConfig.result_path``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.listener.config import RunConfig
from bench.listener.listeners import Measured, measure_public, measure_sparkwatch
from bench.listener.monitor import QueueMonitor
from bench.sparkenv import ListenerBus, start_session
from bench.timing import summarize_ns
from bench.workload import (
    failures,
    produced_progress_events,
    start_queries,
    stop_queries,
    wait_first_progress,
)

WARMUP_TIMEOUT_S = 180.0


def register(spark: Any, cfg: RunConfig) -> list[Measured]:
    # sparkwatch first: with both registered, Spark calls listeners in registration order.
    measured = []

    def history(name: str) -> str | None:
        return os.path.join(cfg.workdir, f"{name}-history.db") if cfg.history else None

    if cfg.kind in ("both", "sparkwatch"):
        measured.append(measure_sparkwatch(spark, cfg.probe_e2e, history("sparkwatch")))
    if cfg.kind in ("both", "public"):
        measured.append(measure_public(spark, cfg.probe_e2e, history("public")))
    return measured


def run_window(spark: Any, seconds: float) -> float:
    """Let the queries run for ``seconds`` (returns early, raising, if one fails)."""
    begin = time.monotonic()
    spark.streams.awaitAnyTermination(seconds)
    return time.monotonic() - begin


def listener_result(m: Measured, received_at_stop: int) -> dict[str, Any]:
    callback = m.timer.summary()
    out: dict[str, Any] = {
        "received_at_stop": received_at_stop,
        "received": m.timer.calls,
        "settled": m.settle(),
        "exported": m.exported(),
        "callback": asdict(callback) if callback else None,
        "callback_total_s": sum(m.timer.samples_ns) / 1e9,
        **m.details(),
    }
    if m.probe is not None:
        e2e, scrape = summarize_ns(m.probe.latencies_ns), summarize_ns(m.probe.scrape_ns)
        history = summarize_ns(m.probe.history_latencies_ns)
        out["e2e"] = asdict(e2e) if e2e else None
        out["e2e_history"] = asdict(history) if history else None
        out["e2e_scrape"] = asdict(scrape) if scrape else None
        out["e2e_skipped"], out["e2e_timeouts"] = m.probe.skipped, m.probe.timeouts
        out["e2e_history_timeouts"] = m.probe.history_timeouts
    return out


def measure(spark: Any, cfg: RunConfig) -> dict[str, Any]:
    bus = ListenerBus(spark)
    measured = register(spark, cfg)
    queries = start_queries(spark, cfg.queries, cfg.rows_per_batch, cfg.trigger_ms,
                            os.path.join(cfg.workdir, "checkpoints"))
    warm_begin = time.monotonic()
    warmed = wait_first_progress(queries, WARMUP_TIMEOUT_S)
    warmup_s = time.monotonic() - warm_begin
    monitor = QueueMonitor(bus)
    load_start = os.getloadavg()[0]
    window_s = run_window(spark, cfg.seconds)
    at_stop = {m.name: m.timer.calls for m in measured}
    failed = failures(queries)
    stop_queries(queries)
    produced = produced_progress_events(queries)
    drain_begin = time.monotonic()
    drained = bus.wait_until_empty(cfg.drain_seconds)
    drain_s = time.monotonic() - drain_begin
    result = {
        "kind": cfg.kind, "queries": cfg.queries, "trigger_ms": cfg.trigger_ms,
        "history": cfg.history,
        "warmed_up": warmed, "warmup_s": warmup_s, "window_s": window_s,
        "produced": produced, "failures": failed,
        "drained": drained, "drain_s": drain_s, "peak_streams_queue": monitor.stop(),
        "spark_dropped_streams": bus.dropped(), "spark_events_posted": bus.posted(),
        "streams_capacity": bus.capacity(), "loadavg_1m": [load_start, os.getloadavg()[0]],
        "listeners": {m.name: listener_result(m, at_stop[m.name]) for m in measured},
    }
    for m in measured:
        m.close()
    return result


def main(argv: list[str]) -> int:
    cfg = RunConfig.from_json(argv[0])
    begin = time.monotonic()
    spark = start_session(f"sparkwatch-bench-{cfg.kind}", cfg.workdir, cfg.streams_capacity)
    startup_s = time.monotonic() - begin
    version = spark.version
    try:
        result = measure(spark, cfg)
    finally:
        spark.stop()
    result["startup_s"] = startup_s
    result["pyspark"] = version
    Path(cfg.result_path).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
