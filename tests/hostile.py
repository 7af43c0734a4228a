"""The hostile corpus: real progress events made wrong in every way the validation contract names.

Each case is a request body (raw bytes: some of it, NaN literals, lone surrogate escapes, invalid
UTF-8, duplicate keys, cannot be written by a JSON encoder) and what the collector must say: a
4xx for the whole body, a rejection of the one event naming the field, or acceptance (markup,
quotes and unknown fields are valid and must be stored and rendered as they are).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.conftest import load_fixture

HOSTILE_APP = {"name": "hostile-app", "id": "app-hostile-0001", "spark_version": "4.3.0"}
Event = dict[str, Any]


@dataclass(frozen=True)
class Case:
    name: str
    body: bytes
    expect: str
    """"body 4xx": the whole request refused; "accepted"; else the rejection names this text"""


def progress_event(query_id: str, run_id: str, batch: int = 0) -> Event:
    """A real RocksDB progress (PySpark 4.3, two chained stateful operators)."""
    payload = copy.deepcopy(load_fixture("spark-4.3.0/chained_rocksdb.json")["progress"][-1])
    payload.update(id=query_id, runId=run_id, batchId=batch, name="hostile")
    return {"kind": "progress", "app": HOSTILE_APP, "received_at": time.time(),
            "payload": payload}


_RAW = {"__NAN__": "NaN", "__INF__": "Infinity", "__NINF__": "-Infinity",
        "__SURROGATE__": "\\ud800", "__NUL__": "\\u0000"}


def body_of(events: list[Event], raw: Callable[[str], str] = lambda s: s,
            compact: bool = False) -> bytes:
    """``compact``: without spaces, as the push sink writes a body (the collector's typed way)."""
    text = json.dumps({"events": events}, separators=(",", ":") if compact else None)
    for marker, literal in _RAW.items():
        text = text.replace(f'"{marker}"', literal).replace(marker, literal.strip('"'))
    return raw(text).encode()


def _mutated(path: list[Any], value: Any) -> Callable[[Event], None]:
    def mutate(event: Event) -> None:
        holder = event["payload"]
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = value
    return mutate


def _all(*mutations: Callable[[Event], None]) -> Callable[[Event], None]:
    def mutate(event: Event) -> None:
        for one in mutations:
            one(event)
    return mutate


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return value


# (name, mutation of one event, the expected outcome)
MUTATIONS: list[tuple[str, Callable[[Event], None], str]] = [
    ("NaN in an integer", _mutated(["stateOperators", 0, "numRowsTotal"], "__NAN__"),
     "stateOperators[0].numRowsTotal"),
    ("Infinity in batchId", _mutated(["batchId"], "__INF__"), "batchId"),
    ("-Infinity in a size", _mutated(["stateOperators", 1, "memoryUsedBytes"], "__NINF__"),
     "stateOperators[1].memoryUsedBytes"),
    ("2^63 rows", _mutated(["stateOperators", 1, "numRowsTotal"], 2**63),
     "stateOperators[1].numRowsTotal: 9223372036854775808 is out of range"),
    ("2^64 rows", _mutated(["stateOperators", 0, "numRowsTotal"], 2**64),
     "stateOperators[0].numRowsTotal"),
    ("a negative count", _mutated(["stateOperators", 0, "numRowsUpdated"], -1),
     "stateOperators[0].numRowsUpdated: -1 is out of range"),
    ("a fraction in a count", _mutated(["numInputRows"], 1.5), "numInputRows"),
    ("1e300 in a count", _mutated(["stateOperators", 0, "commitTimeMs"], 1e300),
     "stateOperators[0].commitTimeMs"),
    ("NUL in the query name", _mutated(["name"], "a__NUL__b"), "name: string holds a NUL"),
    ("a lone surrogate in the name", _mutated(["name"], "x__SURROGATE__y"),
     "name: string holds a lone surrogate"),
    ("a 1 MiB query name", _mutated(["name"], "n" * (1 << 20)),
     "name: string of 1048576 characters is over the limit of 256"),
    ("a 1 KiB custom metric key",
     _mutated(["stateOperators", 0, "customMetrics", "k" * 1024], 1), "customMetrics"),
    ("1,000 custom metrics",
     _mutated(["stateOperators", 0, "customMetrics"], {f"m{i}": i for i in range(1000)}),
     "stateOperators[0].customMetrics: 1000 entries is over the limit of 256"),
    ("a progress without a batch id", lambda e: e["payload"].pop("batchId"),
     "progress.batchId: required integer is missing or null"),
    ("a null batch id", _mutated(["batchId"], None),
     "progress.batchId: required integer is missing or null"),
    ("a string where a count goes", _mutated(["stateOperators", 0, "numRowsTotal"], "12"),
     "stateOperators[0].numRowsTotal: expected an integer"),
    ("an object where the operators go", _mutated(["stateOperators"], {"a": 1}),
     "progress.stateOperators: expected a JSON array"),
    ("1,000 operators", lambda e: e["payload"].update(
        stateOperators=e["payload"]["stateOperators"][:1] * 1000),
     "progress.stateOperators: 1000 entries is over the limit of 64"),
    ("nesting 40 deep in observedMetrics", _mutated(["observedMetrics"], {"o": _deep(40)}),
     "nested deeper than the limit of 32"),
    # Free-form values kept as they came (offsets, the eventTime map): a canonical body, read
    # the typed way, vouches for their values but not for how deep or long they are.
    ("nesting 40 deep in a source offset", _mutated(["sources", 0, "startOffset"], _deep(40)),
     "nested deeper than the limit of 32"),
    ("a 70,000-character string in a source offset",
     _mutated(["sources", 0, "endOffset"], "o" * 70_000),
     "sources[0].endOffset: string of 70000 characters is over the limit of 65536"),
    ("a 1 KiB key in the eventTime map", _mutated(["eventTime", "k" * 1024], "x"),
     "is over the limit of 256"),
    ("a Kafka topic of the longest name Kafka takes (249 characters) in a source offset",
     _mutated(["sources", 0, "startOffset"], {"t" * 249: {"0": 5, "1": 7}}), "accepted"),
    # The rejection names the key, and must still encode as UTF-8 in the answer.
    ("a lone surrogate in a custom metric key",
     _mutated(["stateOperators", 0, "customMetrics", "k__SURROGATE__"], 1),
     "stateOperators[0].customMetrics.k\\ud800: string holds a lone surrogate"),
    ("NaN received time", lambda e: e.update(received_at="__NAN__"), "event.received_at"),
    ("a NUL in the app name", lambda e: e.update(app={**HOSTILE_APP, "name": "a__NUL__"}),
     "event.app.name"),
    ("a newline in the query id", _mutated(["id"], "a\nb"),
     "progress.id: 'a\\nb' is not an id (printable characters without '/', not '.' or '..', "
     "no space at either end)"),
    # It looked, in every list, like another tenant's id without the space.
    ("a trailing space in the query id", _mutated(["id"], "q "), "progress.id: 'q ' is not an id"),
    ("a leading space in the run id", _mutated(["runId"], " r"),
     "progress.runId: ' r' is not an id"),
    ("a dot-dot query id", _mutated(["id"], ".."), "progress.id: '..' is not an id"),
    ("a dot run id", _mutated(["runId"], "."), "progress.runId: '.' is not an id"),
    ("a slash in the run id", _mutated(["runId"], "../b"),
     "progress.runId: '../b' is not an id"),
    ("a batch time past year 9999 in UTC", _mutated(["timestamp"], "9999-12-31T23:59:59-01:00"),
     "progress.timestamp: '9999-12-31T23:59:59-01:00' is out of range"),
    ("a batch time in the history's last days", _mutated(["timestamp"], "9999-12-28T00:00:00Z"),
     "progress.timestamp: '9999-12-28T00:00:00Z' is out of range (years 0001 to 9998, in UTC)"),
    # Read in the parsing process's own zone, it was stored hours apart on two hosts.
    ("a batch time without a zone", _mutated(["timestamp"], "2026-11-21 10:18:00"),
     "progress.timestamp: an ISO-8601 timestamp without a zone: '2026-11-21 10:18:00' (Spark "
     "writes UTC, ending in Z)"),
    ("an event time without a zone", _mutated(["eventTime", "max"], "2026-11-21T10:18:00.000"),
     "eventTime.max: an ISO-8601 timestamp without a zone"),
    ("an event time before year 1 in UTC",
     _mutated(["eventTime", "watermark"], "0001-01-01T00:00:00+01:00"),
     "eventTime.watermark: '0001-01-01T00:00:00+01:00' is out of range (years 0001 to 9999"),
    ("event times at both ends of the calendar", _mutated(["eventTime"], {
        "min": "0001-01-01T00:00:00.000Z", "avg": "5000-06-30T12:00:00.000Z",
        "max": "9999-12-31T23:59:59.999Z", "watermark": "9999-12-31T23:59:59.999Z"}),
     "accepted"),
    # Rates are rows over a duration: never negative (Spark's processed rate divides by at least
    # 1 ms; a negative input rate only comes of the driver's clock stepping back, which the
    # listener reads as unknown). NaN and the infinities mean unknown, as Spark omits them.
    ("a negative input rate", _mutated(["inputRowsPerSecond"], -12.5),
     "progress.inputRowsPerSecond: -12.5 is out of range (0 or more rows per second)"),
    ("a negative processed rate", _mutated(["processedRowsPerSecond"], -0.1),
     "progress.processedRowsPerSecond: -0.1 is out of range"),
    ("a negative source input rate", _mutated(["sources", 0, "inputRowsPerSecond"], -1),
     "sources[0].inputRowsPerSecond: -1 is out of range"),
    ("the most negative source processed rate",
     _mutated(["sources", 0, "processedRowsPerSecond"], -1.7e308),
     "sources[0].processedRowsPerSecond: -1.7e+308 is out of range"),
    ("rates at both ends of their range", _all(
        _mutated(["inputRowsPerSecond"], 1.7e308), _mutated(["processedRowsPerSecond"], 0.0),
        _mutated(["sources", 0, "inputRowsPerSecond"], -0.0),
        _mutated(["sources", 0, "processedRowsPerSecond"], 2**63 - 1)), "accepted"),
    # Spark's durations, batch ids and row counts are never negative; -1 output rows is Spark's
    # "not reported" (a V1 sink), -1 a custom metric's "none yet" (SnapshotLastUploaded).
    ("a negative batch duration", _mutated(["batchDuration"], -40),
     "progress.batchDuration: -40 is out of range (0.."),
    ("a negative phase duration", _mutated(["durationMs", "addBatch"], -3),
     "progress.durationMs.addBatch: -3 is out of range (0.."),
    ("a negative batch id", _mutated(["batchId"], -1), "progress.batchId: -1 is out of range"),
    ("a negative source row count", _mutated(["sources", 0, "numInputRows"], -5),
     "sources[0].numInputRows: -5 is out of range (0.."),
    ("output rows below -1", _mutated(["sink", "numOutputRows"], -2),
     "sink.numOutputRows: -2 is out of range (-1.."),
    ("the -1 values Spark reports", _all(
        _mutated(["sink", "numOutputRows"], -1),
        _mutated(["stateOperators", 0, "customMetrics", "SnapshotLastUploaded.partition_0_default"],
                 -1)), "accepted"),
    ("the epoch as watermark with event times before it", _mutated(["eventTime"], {
        "min": "1969-12-31T23:59:58.000Z", "avg": "1969-12-31T23:59:59.000Z",
        "max": "1970-01-01T00:00:00.000Z", "watermark": "1970-01-01T00:00:00.000Z"}),
     "accepted"),
    ("counts at the top of 64 bits", _all(*(
        _mutated(path, 2**63 - 1) for path in (
            ["numInputRows"], ["batchDuration"], ["stateOperators", 0, "numRowsUpdated"],
            ["stateOperators", 0, "allUpdatesTimeMs"]))), "accepted"),
    ("markup and quotes in names", _mutated(["name"], '<script>alert("x")</script>\'\\'),
     "accepted"),
    ("fields Spark may add later", _mutated(["futureField"], {"nested": [1, "two", None]}),
     "accepted"),
]


def one_event_cases(make: Callable[[int], Event], compact: bool = False) -> list[Case]:
    """Each mutation applied to a fresh event ``make(i)``, one request each."""
    cases = []
    for i, (name, mutate, expect) in enumerate(MUTATIONS):
        event = make(i)
        mutate(event)
        cases.append(Case(name, body_of([event], compact=compact), expect))
    return cases


def body_cases(make: Callable[[int], Event]) -> list[Case]:
    """Bodies wrong as a whole, or in a way only raw JSON text can be."""
    good = json.dumps({"events": [make(0)]})
    op_total = '"numRowsTotal": '
    event = make(0)
    event["payload"]["futureField"] = "__DEEP__"
    deep = json.dumps({"events": [event]}).replace(
        '"__DEEP__"', '{"a": ' * 1000 + "1" + "}" * 1000)
    return [
        Case("an empty body", b"", "body 4xx"),
        Case("not JSON", b"{events: [", "body 4xx"),
        Case("invalid UTF-8", good.replace('"hostile"', '"\xff"').encode("latin-1"),
             "body 4xx"),
        # Deeper than any JSON parser here reads (orjson stops at 1,024, Python at its stack).
        Case("nesting 5,000 deep", ('{"events": [' + "[" * 5000 + "]" * 5000 + "]}").encode(),
             "body 4xx"),
        Case("nesting 1,000 deep in an event", deep.encode(), "futureField"),
        # Python's JSON reader refuses an integer literal over 4,300 digits with a ValueError
        # of its own, not a JSONDecodeError.
        Case("an integer of 4,301 digits", good.replace('"batchId": 0', '"batchId": ' + "9" * 4301)
             .encode(), "body 4xx"),
        Case("events not an array", b'{"events": {"a": 1}}', "body 4xx"),
        Case("duplicate events key", b'{"events": [], "events": []}', "body 4xx"),
        Case("a duplicate key in an operator",
             good.replace(op_total, op_total + '1, "numRowsTotal": ', 1).encode(),
             "stateOperators[0].numRowsTotal: duplicate key"),
        Case("an event that is a number", b'{"events": [42]}', "event: expected a JSON object"),
    ]
