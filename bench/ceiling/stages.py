"""CPU per progress event of each stage of the collector's work, measured in process.

Each stage runs the product's own code on the benchmark fleet's events (``bench/fleet.py``), in
the order the collector runs them today: at ingest the typed read of the request
(:func:`~sparkwatch.collector.typedwire.typed_body`), the fold into /metrics and the spool
record; in the history writer process the typed read back (``read_span`` with
:func:`~sparkwatch.collector.typedwire.typed_record`), the rows and their COPY values. Each is
timed with ``time.thread_time`` over whole requests of ``batch`` events after a warm-up request,
with the collector's garbage-collector settings. Only this thread's CPU is counted: the
question these figures answer is how many cores a rate takes, and on a machine shared with
other work the wall clock would answer another one.
"""

from __future__ import annotations

import gzip
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.fleet import Fleet
from sparkwatch.collector.body import decompress
from sparkwatch.collector.config import DEFAULT_TENANT
from sparkwatch.collector.gctune import tune_gc
from sparkwatch.collector.history_process import decode_tenant_records
from sparkwatch.collector.ingest import canonical_event, spool_record
from sparkwatch.collector.typedwire import typed_body, typed_record
from sparkwatch.history.copyrows import copy_rows
from sparkwatch.metrics.state import MetricState
from sparkwatch.spool import Spool, read_span

GZIP_LEVEL = 5  # the push sink's
FLOOR = "floor"
"""The side of the stages only the least any collector could do is made of (not the collector's)."""


@dataclass(frozen=True, slots=True)
class Stage:
    side: str
    """"ingest" (the request path), "history" (the writer process), or "floor" (a reference:
    what the least any collector could do spends, not part of the collector's sum)"""
    name: str
    code: str
    us_per_event: float


def requests(fleet: Fleet, events: int, batch: int) -> list[bytes]:
    """Gzipped request bodies exactly as the push sink sends them."""
    wire = list(fleet.events(0, events))
    return [gzip.compress(orjson.dumps({"events": wire[i:i + batch]}), GZIP_LEVEL)
            for i in range(0, events, batch)]


def cpu_per_event(work: Callable[[Any], Any], inputs: Sequence[Any], per_input: int
                  ) -> tuple[float, list[Any]]:
    """CPU µs per event of ``work`` over ``inputs`` (the first one untimed: warm-up)."""
    outputs = [work(inputs[0])]
    start = time.thread_time()
    outputs += [work(x) for x in inputs[1:]]
    elapsed = time.thread_time() - start
    return elapsed / ((len(inputs) - 1) * per_input) * 1e6, outputs


def measure(fleet: Fleet, events: int, batch: int) -> list[Stage]:
    tune_gc()
    bodies = requests(fleet, events, batch)
    stages: list[Stage] = []

    def stage(side: str, name: str, code: str, work: Callable[[Any], Any],
              inputs: Sequence[Any]) -> list[Any]:
        us, out = cpu_per_event(work, inputs, batch)
        stages.append(Stage(side, name, code, us))
        return out

    inflated = stage("ingest", "inflate the gzip request", "collector/body.py `decompress`",
                     lambda b: decompress(b, "gzip", 1 << 30), bodies)
    stage(FLOOR, "decode JSON", "orjson.loads of the body (no validation: the least's)",
          orjson.loads, inflated)
    checked = stage("ingest", "decode and validate, typed (msgspec)",
                    "collector/typedwire.py `typed_body`",
                    lambda raw: _typed(raw, batch), inflated)
    state = MetricState()
    stage("ingest", "fold into the metric state (/metrics)", "`MetricState.apply`",
          lambda read: [state.apply(parsed) for parsed, _ in read], checked)
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        spool = Spool(Path(tmp), 1 << 40, fsync=True)
        stage("ingest", "spool: frame the record and append, fsync per request",
              "`spool_record` of the received bytes + `Spool.append_encoded` "
              "(CPU only; fsync waits excluded)",
              lambda read: spool.append_encoded(
                  spool_record(DEFAULT_TENANT, [data for _, data in read])), checked)
        spans = _record_spans(spool)
        parsed = stage("history", "read back from the spool, typed (msgspec)",
                       "`read_span(..., typed_record)` + `decode_tenant_records`",
                       lambda span: [e for _, e in decode_tenant_records(
                           read_span(Path(tmp), span[0], span[1], 1 << 30, typed_record)[0])],
                       spans)
        spool.close()
    stage("history", "build the history rows (7 per event) and their COPY values",
          "`copy_rows` (the same values on SQLite)",
          lambda p: copy_rows(p).statements(), parsed)
    return stages


def _typed(raw: bytes, batch: int) -> list[Any]:
    read = typed_body(raw, batch, canonical_event)
    if read is None:  # the fleet's bodies are canonical: the exact way would be another stage
        raise RuntimeError("the typed read refused a fleet body: the stage would time nothing")
    return read


def _record_spans(spool: Spool) -> list[tuple[Any, Any]]:
    """(start, end) of every record in the spool, in order."""
    spans = []
    position = spool.cursor
    while position < spool.end:
        _, after = read_span(spool.directory, position, spool.end, 1)
        spans.append((position, after))
        position = after
    return spans
