"""Reading a checkpoint through Spark's State Data Source (Spark 4.0+): which stores it has, the
watermark of a batch, and a DataFrame per store. Every read is read-only."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sparkwatch.state.model import Target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MIN_SPARK = (4, 0)


class StateError(Exception):
    """The state cannot be read; the message says why in one line."""


def spark_reason(exc: BaseException) -> str:
    """Why Spark failed, in one line. A JVM error reached Python as Py4J's "An error occurred
    while calling o38.collectToPython.", which names a Py4J object and not the fault (a
    malformed log file, a corrupt delta file): the JVM exception's own message is used, with its
    root cause when the message does not already say it (Spark's "An error occurred during
    loading state" over a java.io.EOFException)."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return _first_line(str(exc)) or type(exc).__name__
    try:
        chain = []
        seen = 0
        while java is not None and seen < 20:
            chain.append((str(java.getClass().getSimpleName()), str(java.getMessage() or "")))
            java, seen = java.getCause(), seen + 1
    except Exception:  # noqa: BLE001 - a JVM that went away: Py4J's own line will do
        return _first_line(str(exc)) or type(exc).__name__
    # A failed job's wrapper says which task failed, not why.
    while len(chain) > 1 and chain[0][1].startswith("Job aborted due to stage failure"):
        chain.pop(0)
    name, message = chain[0]
    top = _first_line(message) or name
    root_name, root_message = chain[-1]
    root = _first_line(root_message)
    if len(chain) > 1 and (not root or root not in top):
        top += f" ({root_name}: {root})" if root else f" ({root_name})"
    return top


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def require_spark_4(version: str) -> None:
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) < MIN_SPARK:
        raise StateError(
            f"reading state needs Spark 4.0 or later (the State Data Source); this is "
            f"PySpark {version}: pip install 'pyspark>=4.0'"
        )


_URI_ESCAPED = re.compile(r'[\s%|#?"<>\[\]^`{}\\]')
"""Characters java.net.URI escapes in a path: the State Data Source qualifies the checkpoint
into a URI and reads it back as a path, escaped again (SPARK: ``/chk/a b`` is looked for at
``/chk/a%20b``), and then found "No committed batch" in a checkpoint that has them."""
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@contextmanager
def readable_location(checkpoint: str) -> Iterator[str]:
    """Where Spark can read ``checkpoint``: itself, or for a local path holding a character
    Spark's State Data Source escapes twice (a space, ``%``, ``|``...), a symbolic link to it
    with a plain name in a temporary directory (made outside the checkpoint, removed
    afterwards). State errors raised meanwhile name ``checkpoint``, not the link."""
    local = checkpoint
    if _SCHEME.match(checkpoint):
        if not checkpoint.startswith("file:"):
            yield checkpoint
            return
        local = re.sub(r"^file:(//)?", "", checkpoint)
    if not _URI_ESCAPED.search(local) or not os.path.exists(local):
        yield checkpoint
        return
    with tempfile.TemporaryDirectory(prefix="sparkwatch-state-") as tmp:
        alias = str(Path(tmp) / "checkpoint")
        os.symlink(os.path.abspath(local), alias)
        try:
            yield alias
        except StateError as exc:
            raise StateError(str(exc).replace(alias, checkpoint)) from exc.__cause__


def targets(spark: SparkSession, checkpoint: str) -> list[Target]:
    """Every store of every stateful operator, from the checkpoint's state metadata; one target
    per state variable for transformWithState."""
    rows = spark.read.format("state-metadata").load(checkpoint).collect()
    out: list[Target] = []
    for r in sorted(rows, key=lambda r: (r.operatorId, r.stateStoreName)):
        base = dict(operator_id=int(r.operatorId), operator_name=r.operatorName,
                    store_name=r.stateStoreName, partitions=int(r.numPartitions),
                    min_batch=int(r.minBatchId), max_batch=int(r.maxBatchId))
        names = _state_vars(r.operatorProperties)
        if names:
            out.extend(Target(**base, state_var=n) for n in names)
        else:
            out.append(Target(**base))
    return out


def is_checkpoint(spark: SparkSession, checkpoint: str) -> bool:
    """Whether the location holds a checkpoint (its offset log), through Hadoop's FileSystem so
    any URI Spark reads works."""
    jvm: Any = spark._jvm  # type: ignore[attr-defined]
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/offsets")
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]
    return bool(fs.exists(path))


def _state_vars(properties: str | None) -> list[str]:
    if not properties:
        return []
    data = json.loads(properties)
    return [v["stateName"] for v in data.get("stateVariables", [])]


def options(target: Target, batch_id: int | None) -> dict[str, str]:
    opts = {"operatorId": str(target.operator_id)}
    if target.state_var is not None:
        opts["stateVarName"] = target.state_var
    else:
        opts["storeName"] = target.store_name
    if batch_id is not None:
        opts["batchId"] = str(batch_id)
    return opts


def store_frame(spark: SparkSession, checkpoint: str, target: Target,
                batch_id: int | None) -> DataFrame:
    return spark.read.format("statestore").options(**options(target, batch_id)).load(checkpoint)


def change_frame(spark: SparkSession, checkpoint: str, target: Target, first: int,
                 last: int) -> DataFrame:
    opts = {**options(target, None), "readChangeFeed": "true",
            "changeStartBatchId": str(first), "changeEndBatchId": str(last)}
    return spark.read.format("statestore").options(**opts).load(checkpoint)


def watermark_ms(spark: SparkSession, checkpoint: str, batch_id: int) -> int | None:
    """The watermark batch ``batch_id`` ran with, from its offset log entry (None when the query
    has no watermark yet)."""
    path = f"{checkpoint.rstrip('/')}/offsets/{batch_id}"
    try:
        lines = [r.value for r in spark.read.text(path).collect()]
    except Exception:  # noqa: BLE001 - an offset log we cannot read: no watermark to compare
        return None
    meta: dict[str, Any] = next((json.loads(x) for x in lines if x.startswith("{")
                                 and "batchWatermarkMs" in x), {})
    mark = int(meta.get("batchWatermarkMs", 0))
    return mark or None
