"""A progress line on stderr while Spark reads state: silent for quick reads, then the running
stage's finished and total tasks once a read takes longer than ``after`` seconds."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def progress(spark: SparkSession, label: str, out: TextIO | None = None, after: float = 2.0,
             every: float = 1.0) -> Iterator[None]:
    stream = out or sys.stderr
    if not stream.isatty():
        # A pipe or a log file gets the result, not a hundred carriage returns.
        yield
        return
    done = threading.Event()
    shown = threading.Event()

    def report() -> None:
        if done.wait(after):
            return
        tracker = spark.sparkContext.statusTracker()
        while not done.is_set():
            finished = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    finished += info.numCompletedTasks
                    total += info.numTasks
            if total:
                line = f"reading {label}: {_bar(finished, total)} {finished}/{total} tasks"
                stream.write("\r\033[K" + line)
                stream.flush()
                shown.set()
            done.wait(every)

    thread = threading.Thread(target=report, name="sparkwatch-state-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if shown.is_set():
            stream.write("\r\033[K")
            stream.flush()


def _bar(finished: int, total: int, width: int = 20) -> str:
    filled = width * finished // total if total else 0
    return "[" + "#" * filled + "." * (width - filled) + "]"
