"""CPU per progress event of each stage of the collector's work, measured in process.

Each stage runs the product's own code on the benchmark fleet's events (``bench/fleet.py``), in
the order the collector runs them, and is timed with ``time.process_time`` over whole requests of
``batch`` events after a warm-up request, with the collector's garbage-collector settings. Only
CPU is counted: the question these figures answer is how many cores a rate takes.
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
from sparkwatch.collector.body import decompress, events_of
from sparkwatch.collector.fastjson import encode
from sparkwatch.collector.gctune import tune_gc
from sparkwatch.collector.history_process import decode_records
from sparkwatch.history.rows import rows_for
from sparkwatch.metrics.state import MetricState
from sparkwatch.model.events import ParsedEvent
from sparkwatch.model.parse import envelope_from_dict, envelope_to_dict, parse_envelope
from sparkwatch.spool import Spool, read_span

GZIP_LEVEL = 5  # the push sink's


@dataclass(frozen=True, slots=True)
class Stage:
    side: str
    """"ingest" (the request path) or "history" (the writer process)"""
    name: str
    code: str
    us_per_event: float


@dataclass(slots=True)
class Material:
    """Each stage's input, made by the stage before it (and kept, so stages time alone)."""

    bodies: list[bytes]
    inflated: list[bytes] | None = None
    decoded: list[list[Any]] | None = None
    parsed: list[list[ParsedEvent]] | None = None


def requests(fleet: Fleet, events: int, batch: int) -> list[bytes]:
    """Gzipped request bodies exactly as the push sink sends them."""
    wire = list(fleet.events(0, events))
    return [gzip.compress(orjson.dumps({"events": wire[i:i + batch]}), GZIP_LEVEL)
            for i in range(0, events, batch)]


def cpu_per_event(work: Callable[[Any], Any], inputs: Sequence[Any], per_input: int
                  ) -> tuple[float, list[Any]]:
    """CPU µs per event of ``work`` over ``inputs`` (the first one untimed: warm-up)."""
    outputs = [work(inputs[0])]
    start = time.process_time()
    outputs += [work(x) for x in inputs[1:]]
    elapsed = time.process_time() - start
    return elapsed / ((len(inputs) - 1) * per_input) * 1e6, outputs


def measure(fleet: Fleet, events: int, batch: int) -> list[Stage]:
    tune_gc()
    m = Material(requests(fleet, events, batch))
    stages: list[Stage] = []

    def stage(side: str, name: str, code: str, work: Callable[[Any], Any],
              inputs: Sequence[Any]) -> list[Any]:
        us, out = cpu_per_event(work, inputs, batch)
        stages.append(Stage(side, name, code, us))
        return out

    m.inflated = stage("ingest", "inflate the gzip request", "collector/api.py `decompress`",
                       lambda b: decompress(b, "gzip", 1 << 30), m.bodies)
    m.decoded = stage("ingest", "decode JSON", "collector/api.py `events_of` (orjson)",
                      lambda raw: events_of(raw, 1 << 20)[0], m.inflated)
    m.parsed = stage("ingest", "validate into the event model",
                     "`envelope_from_dict` + `parse_envelope`",
                     lambda items: [parse_envelope(envelope_from_dict(i)) for i in items],
                     m.decoded)
    state = MetricState()
    stage("ingest", "fold into the metric state (/metrics)", "`MetricState.apply`",
          lambda parsed: [state.apply(p) for p in parsed], m.parsed)
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as tmp:
        spool = Spool(Path(tmp), 1 << 40, fsync=True)
        stage("ingest", "spool: encode and append, fsync per request",
              "`encode` per event + `Spool.append_encoded` (CPU only; fsync waits excluded)",
              lambda parsed: spool.append_encoded(
                  b"[" + b",".join(encode(envelope_to_dict(p.envelope)) for p in parsed) + b"]"),
              m.parsed)
        ends = _record_spans(spool)
        records = stage("history", "read back from the spool (JSON)", "`read_span`",
                        lambda span: read_span(Path(tmp), span[0], span[1], 1 << 30)[0], ends)
        spool.close()
    stage("history", "validate into the event model again", "`decode_records`",
          decode_records, records)
    stage("history", "build the history rows (7 per event)", "`rows_for`", rows_for, m.parsed)
    return stages


def _record_spans(spool: Spool) -> list[tuple[Any, Any]]:
    """(start, end) of every record in the spool, in order."""
    spans = []
    position = spool.cursor
    while position < spool.end:
        _, after = read_span(spool.directory, position, spool.end, 1)
        spans.append((position, after))
        position = after
    return spans
