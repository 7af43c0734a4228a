#!/usr/bin/env python
"""Capture real Structured Streaming event JSON from local PySpark, as test fixtures.

For each stateful operator kind and state store provider this runs a small real query on
``local[2]`` and writes what Spark emitted to
``<out>/spark-<pyspark version>/<kind>_<provider>.json``:

    {"spark_version", "kind", "provider", "operators", "output_mode", "query",
     "started": {...}, "progress": [{...}, ...], "idle": {...}, "terminated": {...}}

Every object is Spark's own JSON (``event.json()`` / ``progress.json()`` on the JVM side), trimmed
to a few progress objects that include batch 0, batches with data and no-data batches.

Inputs are JSON files the script writes itself, one "round" at a time, with fixed event times, so
the state numbers are the same on every run (only ids, timestamps and timings differ).
Synchronisation waits on listener events with a deadline, never on sleeps.

Standalone on purpose (no sparkwatch import): it runs under any PySpark, e.g.
``/opt/pyspark35/bin/python scripts/capture_samples.py``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.local import local_spark  # noqa: E402

PROVIDERS = {
    # Same class names on 3.5 and 4.x (checked in spark-sql_2.12-3.5.9 and spark-sql_2.13-4.3.0).
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
SCHEMA = "id LONG, key STRING, ts TIMESTAMP, v LONG"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MAX_PROGRESS = 6
WAIT_SECONDS = 120.0

Row = tuple[int, str, int]
"""(id, key, seconds after T0); v is derived from id."""

# Rounds of input: each round is written as one file once the query went idle on the previous
# one. Duplicates (same id and ts) exercise dedupe; rounds 2 and 3 carry rows older than the
# watermark (max event time - 10 s) so something is dropped by the watermark: ts +1 is late for
# row-level operators in round 2, ts +5 is late even for 10 s windows in round 3.
ROUNDS: tuple[tuple[Row, ...], ...] = (
    (
        (1, "a", 0),
        (2, "b", 1),
        (3, "a", 2),
        (4, "c", 3),
        (5, "b", 4),
        (6, "a", 12),
        (7, "c", 13),
        (3, "a", 2),
    ),
    ((9, "a", 31), (10, "b", 32), (11, "c", 33), (12, "a", 35), (2, "b", 1), (10, "b", 32)),
    ((13, "a", 61), (14, "b", 62), (15, "c", 70), (14, "b", 62), (16, "a", 40), (17, "b", 5)),
)
# The right side of the join: matches some left rows within 5 s.
RIGHT_ROUNDS: tuple[tuple[Row, ...], ...] = (
    ((101, "a", 1), (102, "b", 3), (103, "c", 20)),
    ((104, "a", 33), (105, "c", 30)),
    ((106, "b", 63), (107, "a", 60)),
)


@dataclass(frozen=True)
class Scenario:
    kind: str
    operators: str
    """The operatorName(s) expected, for the reader of the fixture."""
    build: Callable[[Any, list[Path]], Any]
    output_mode: str = "append"
    inputs: int = 1
    providers: tuple[str, ...] = ("hdfs", "rocksdb")
    min_version: tuple[int, int] = (3, 5)
    needs: str = ""
    """An attribute the PySpark API must have (e.g. "transformWithState"), else skipped."""
    foreach_batch: bool = False
    """Write through foreachBatch (a V1 sink: numOutputRows -1) instead of noop."""


# --- query builders ---------------------------------------------------------------------------


def _read(spark: Any, path: Path) -> Any:
    return spark.readStream.schema(SCHEMA).json(str(path))


def _watermarked(spark: Any, path: Path) -> Any:
    return _read(spark, path).withWatermark("ts", "10 seconds")


def build_window_agg(spark: Any, inputs: list[Path]) -> Any:
    from pyspark.sql import functions as F

    return _watermarked(spark, inputs[0]).groupBy(F.window("ts", "10 seconds"), "key").count()


def build_update_agg(spark: Any, inputs: list[Path]) -> Any:
    from pyspark.sql import functions as F

    return _read(spark, inputs[0]).groupBy("key").agg(F.count("*").alias("n"), F.sum("v"))


def build_dedupe(spark: Any, inputs: list[Path]) -> Any:
    return _watermarked(spark, inputs[0]).dropDuplicates(["id", "ts"])


def build_dedupe_within_watermark(spark: Any, inputs: list[Path]) -> Any:
    return _watermarked(spark, inputs[0]).dropDuplicatesWithinWatermark(["id"])


def build_session_window(spark: Any, inputs: list[Path]) -> Any:
    from pyspark.sql import functions as F

    return (
        _watermarked(spark, inputs[0]).groupBy(F.session_window("ts", "5 seconds"), "key").count()
    )


def build_join(spark: Any, inputs: list[Path]) -> Any:
    from pyspark.sql import functions as F

    left = _watermarked(spark, inputs[0]).select(
        F.col("key").alias("lkey"), F.col("ts").alias("lts"), F.col("v").alias("lv")
    )
    right = (
        _read(spark, inputs[1])
        .withWatermark("ts", "10 seconds")
        .select(F.col("key").alias("rkey"), F.col("ts").alias("rts"), F.col("v").alias("rv"))
    )
    cond = F.expr(
        "lkey = rkey AND rts BETWEEN lts - INTERVAL 5 SECONDS AND lts + INTERVAL 5 SECONDS"
    )
    return left.join(right, cond, "inner")


def build_limit(spark: Any, inputs: list[Path]) -> Any:
    return _read(spark, inputs[0]).limit(10)


def build_chained(spark: Any, inputs: list[Path]) -> Any:
    from pyspark.sql import functions as F

    deduped = _watermarked(spark, inputs[0]).dropDuplicates(["id", "ts"])
    return deduped.groupBy(F.window("ts", "10 seconds"), "key").count()


def _count_in_pandas(key: Any, pdfs: Iterator[Any], state: Any) -> Iterator[Any]:
    import pandas as pd

    count = state.get[0] if state.exists else 0
    for pdf in pdfs:
        count += len(pdf)
    state.update((count,))
    yield pd.DataFrame({"key": [key[0]], "count": [count]})


def build_apply_in_pandas_with_state(spark: Any, inputs: list[Path]) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    return (
        _read(spark, inputs[0])
        .groupBy("key")
        .applyInPandasWithState(
            _count_in_pandas,
            "key STRING, count LONG",
            "count LONG",
            "update",
            GroupStateTimeout.NoTimeout,
        )
    )


def _counting_processor(pandas: bool) -> Any:
    """A StatefulProcessor keeping a count per key in a ValueState (imported lazily: 4.x only)."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql.streaming import StatefulProcessor

    class Counting(StatefulProcessor):  # type: ignore[misc, valid-type]
        def init(self, handle: Any) -> None:
            self.count = handle.getValueState("count", "count LONG")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any = None) -> Iterator[Any]:
            n = self.count.get()[0] if self.count.exists() else 0
            n += sum(len(pdf) for pdf in rows) if pandas else sum(1 for _ in rows)
            self.count.update((n,))
            if pandas:
                import pandas as pd

                yield pd.DataFrame({"key": [key[0]], "count": [n]})
            else:
                yield SparkRow(key=key[0], count=n)

        def close(self) -> None:
            pass

    return Counting()


def _counting_tws(spark: Any, inputs: list[Path], pandas: bool) -> Any:
    grouped = _read(spark, inputs[0]).groupBy("key")
    transform = grouped.transformWithStateInPandas if pandas else grouped.transformWithState
    return transform(_counting_processor(pandas=pandas), "key STRING, count LONG", "Update", "None")


def build_tws_in_pandas(spark: Any, inputs: list[Path]) -> Any:
    return _counting_tws(spark, inputs, pandas=True)


def build_tws_row(spark: Any, inputs: list[Path]) -> Any:
    return _counting_tws(spark, inputs, pandas=False)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("window_agg", "stateStoreSave", build_window_agg),
    Scenario("update_agg", "stateStoreSave", build_update_agg, "update", foreach_batch=True),
    Scenario("dedupe", "dedupe", build_dedupe),
    Scenario("dedupe_within_watermark", "dedupeWithinWatermark", build_dedupe_within_watermark),
    Scenario(
        "session_window",
        "sessionWindowStateStoreSaveExec (defaultName on 3.5)",
        build_session_window,
    ),
    Scenario("join", "symmetricHashJoin", build_join, inputs=2),
    Scenario("limit", "globalLimit", build_limit),
    Scenario(
        "chained",
        "stateStoreSave, dedupe (Spark lists the downstream operator first)",
        build_chained,
    ),
    Scenario(
        "apply_in_pandas_with_state",
        "applyInPandasWithState",
        build_apply_in_pandas_with_state,
        "update",
    ),
    Scenario(
        "transform_with_state_in_pandas",
        "transformWithStateInPandasExec",
        build_tws_in_pandas,
        "update",
        providers=("rocksdb",),
        min_version=(4, 0),
    ),
    Scenario(
        "transform_with_state",
        "transformWithStateInPySparkExec",
        build_tws_row,
        "update",
        providers=("rocksdb",),
        min_version=(4, 1),
        needs="transformWithState",
    ),
)


# --- listening --------------------------------------------------------------------------------


class Recorder:
    """A raw JVM listener (PythonStreamingQueryListener) keeping every event's own JSON.

    Going through the JVM interface instead of ``spark.streams.addListener`` gives Spark's
    ``event.json()`` for started/idle/terminated, which PySpark's Python events do not expose.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.events: list[tuple[str, dict[str, Any]]] = []

    def _add(self, kind: str, jevent: Any, raw: Callable[[], str]) -> None:
        try:
            payload = json.loads(raw())
        except Exception as exc:  # noqa: BLE001 - a callback must never raise into Spark
            # Kept so the run fails loudly (see fixture()) instead of waiting for nothing.
            payload = {"_capture_error": f"{kind}: {exc!r}", "runId": _run_id(jevent)}
        with self._cond:
            self.events.append((kind, payload))
            self._cond.notify_all()

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - Java interface names
        self._add("started", jevent, jevent.json)

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        self._add("progress", jevent, lambda: jevent.progress().json())

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        self._add("idle", jevent, jevent.json)

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        self._add("terminated", jevent, jevent.json)

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]

    def of_run(self, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        with self._cond:
            return [(k, e) for k, e in self.events if e.get("runId") == run_id]

    def wait_for(
        self, run_id: str, what: str, done: Callable[[list[tuple[str, dict]]], bool]
    ) -> None:
        """Wait for ``done(events of the run)``; fail early if the query died meanwhile."""
        deadline = time.monotonic() + WAIT_SECONDS
        with self._cond:
            while not done(events := [(k, e) for k, e in self.events if e.get("runId") == run_id]):
                dead = next(
                    (e for k, e in events if k == "terminated" and e.get("exception")), None
                )
                if dead is not None:
                    raise RuntimeError(f"query failed: {str(dead['exception'])[:300]}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {what} within {WAIT_SECONDS:.0f} s")
                self._cond.wait(timeout=left)


def _run_id(jevent: Any) -> str:
    try:
        return str(jevent.runId())
    except Exception:  # noqa: BLE001 - only used to file an error under its run
        return ""


def attach(spark: Any) -> Recorder:
    from pyspark.java_gateway import ensure_callback_server_started

    recorder = Recorder()
    ensure_callback_server_started(spark.sparkContext._gateway)
    jvm = spark.sparkContext._jvm
    wrapper = jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(recorder)
    spark._jsparkSession.streams().addListener(wrapper)
    return recorder


def rows_seen(events: list[tuple[str, dict]]) -> int:
    return sum(e.get("numInputRows", 0) for k, e in events if k == "progress")


def idle_after(rows: int) -> Callable[[list[tuple[str, dict]]], bool]:
    """The query read ``rows`` input rows and then went idle (nothing left, not even no-data)."""
    return lambda events: rows_seen(events) >= rows and bool(events) and events[-1][0] == "idle"


# --- running one scenario -----------------------------------------------------------------------


def write_round(directory: Path, index: int, rows: tuple[Row, ...]) -> None:
    """One JSON-lines file, renamed into place so the file source never sees it half written."""
    lines = [
        json.dumps({"id": i, "key": k, "ts": (T0 + timedelta(seconds=s)).isoformat(), "v": i * 10})
        for i, k, s in rows
    ]
    tmp = directory / f"_round-{index}.tmp"  # names starting with _ are ignored by the source
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(directory / f"round-{index}.json")


def start_query(spark: Any, scenario: Scenario, df: Any, name: str, checkpoint: Path) -> Any:
    writer = (
        df.writeStream.queryName(name)
        .outputMode(scenario.output_mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="250 milliseconds")
    )
    if scenario.foreach_batch:
        writer = writer.foreachBatch(lambda batch, batch_id: batch.count())
    else:
        writer = writer.format("noop")
    return writer.start()


def run_scenario(spark: Any, recorder: Recorder, scenario: Scenario, provider: str) -> dict:
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDERS[provider])
    work = Path(tempfile.mkdtemp(prefix=f"sw-{scenario.kind}-"))
    try:
        inputs = [work / f"in{i}" for i in range(scenario.inputs)]
        for path in inputs:
            path.mkdir()
        name = f"{scenario.kind}_{provider}"
        query = start_query(spark, scenario, scenario.build(spark, inputs), name, work / "ckpt")
        run_id = str(query.runId)
        try:
            feed(recorder, run_id, inputs)
        finally:
            query.stop()
        recorder.wait_for(
            run_id, "terminated event", lambda ev: any(k == "terminated" for k, _ in ev)
        )
        return fixture(spark, scenario, provider, name, recorder.of_run(run_id))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def feed(recorder: Recorder, run_id: str, inputs: list[Path]) -> None:
    sides = (ROUNDS, RIGHT_ROUNDS)
    expected = 0
    for index in range(len(ROUNDS)):
        for side, path in enumerate(inputs):
            rows = sides[side][index]
            write_round(path, index, rows)
            expected += len(rows)
        recorder.wait_for(run_id, f"idle event after {expected} input rows", idle_after(expected))


def fixture(
    spark: Any, scenario: Scenario, provider: str, name: str, events: list[tuple[str, dict]]
) -> dict:
    def first(kind: str) -> dict | None:
        return next((e for k, e in events if k == kind), None)

    broken = [e["_capture_error"] for _, e in events if "_capture_error" in e]
    if broken:
        raise RuntimeError(f"could not read event JSON: {broken[0]}")

    return {
        "spark_version": spark.version,
        "kind": scenario.kind,
        "provider": provider,
        "operators": scenario.operators,
        "output_mode": scenario.output_mode,
        "query": name,
        "started": first("started"),
        "progress": trim([e for k, e in events if k == "progress"]),
        "idle": first("idle"),
        "terminated": first("terminated"),
    }


def trim(progress: list[dict], limit: int = MAX_PROGRESS) -> list[dict]:
    """Keep batch 0, then data and no-data batches alternately, in batch order."""
    if len(progress) <= limit:
        return progress
    keep = [progress[0]]
    data = [p for p in progress[1:] if p.get("numInputRows", 0) > 0]
    empty = [p for p in progress[1:] if p.get("numInputRows", 0) == 0]
    while len(keep) < limit and (data or empty):
        for pool in (data, empty):
            if pool and len(keep) < limit:
                keep.append(pool.pop(0))
    return sorted(keep, key=lambda p: p.get("batchId", -1))


# --- session and main -----------------------------------------------------------------------


def make_session() -> Any:
    return local_spark("sparkwatch-capture", {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.streaming.noDataMicroBatches.enabled": "true",
        # Idle events come once per this interval (default 10 s): keep the run short.
        "spark.sql.streaming.noDataProgressEventInterval": "200ms",
    })


def version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def skip_reason(scenario: Scenario, version: str) -> str | None:
    if version_tuple(version) < scenario.min_version:
        return f"needs Spark {'.'.join(map(str, scenario.min_version))}+"
    if scenario.needs:
        from pyspark.sql import GroupedData

        if not hasattr(GroupedData, scenario.needs):
            return f"PySpark has no GroupedData.{scenario.needs}"
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="KIND",
        choices=[s.kind for s in SCENARIOS],
        help="capture only these kinds",
    )
    parser.add_argument(
        "--provider", nargs="+", choices=sorted(PROVIDERS), default=sorted(PROVIDERS)
    )
    return parser.parse_args(argv)


@dataclass
class Outcome:
    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def capture(args: argparse.Namespace) -> Outcome:
    import pyspark

    spark = make_session()
    recorder = attach(spark)
    out_dir = args.out / f"spark-{pyspark.__version__}"
    out_dir.mkdir(parents=True, exist_ok=True)
    outcome = Outcome()
    try:
        for scenario in SCENARIOS:
            if args.only and scenario.kind not in args.only:
                continue
            reason = skip_reason(scenario, spark.version)
            for provider in [p for p in scenario.providers if p in args.provider]:
                label = f"{scenario.kind}_{provider}"
                if reason is not None:
                    outcome.skipped.append(f"{label}: {reason}")
                    continue
                capture_one(spark, recorder, scenario, provider, out_dir / f"{label}.json", outcome)
    finally:
        spark.stop()
    return outcome


def capture_one(
    spark: Any, recorder: Recorder, scenario: Scenario, provider: str, path: Path, outcome: Outcome
) -> None:
    began = time.monotonic()
    try:
        data = run_scenario(spark, recorder, scenario, provider)
    except Exception as exc:  # noqa: BLE001 - report and go on with the other scenarios
        outcome.failed.append(f"{path.stem}: {type(exc).__name__}: {str(exc)[:500]}")
        print(f"FAILED {path.stem}: {exc!s:.500}", file=sys.stderr, flush=True)
        return
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    outcome.written.append(path)
    batches = [(p["batchId"], p["numInputRows"]) for p in data["progress"]]
    print(f"wrote {path} in {time.monotonic() - began:.1f} s: (batch, rows) {batches}", flush=True)


def main(argv: list[str] | None = None) -> int:
    outcome = capture(parse_args(argv))
    for line in outcome.skipped:
        print(f"skipped {line}")
    for line in outcome.failed:
        print(f"FAILED {line}", file=sys.stderr)
    written, skipped, failed = len(outcome.written), len(outcome.skipped), len(outcome.failed)
    print(f"{written} written, {skipped} skipped, {failed} failed")
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main())
