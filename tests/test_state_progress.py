"""`sparkwatch state`'s progress line, on a real pseudo-terminal and a real Spark job: silent for a
read quicker than its delay and on anything that is not a terminal; otherwise the running stage's
finished and total tasks on one line, rewritten in place and cleared when the read ends."""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Iterator
from typing import Any, TextIO

import pytest

from sparkwatch.state.progress import progress

pytestmark = pytest.mark.spark

TASKS = 4


@pytest.fixture
def terminal() -> Iterator[tuple[TextIO, int]]:
    """The writing side of a pseudo-terminal (a real tty) and the reading side's descriptor."""
    reader, writer = os.openpty()
    out = os.fdopen(writer, "w")
    try:
        yield out, reader
    finally:
        out.close()
        os.close(reader)


def _shown(reader: int) -> str:
    os.set_blocking(reader, False)
    chunks = []
    try:
        while chunk := os.read(reader, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks).decode()


def _slow_job(spark: Any) -> None:
    """Four tasks of half a second each on two cores: about a second of running stage."""
    spark.sparkContext.parallelize(range(TASKS), TASKS).foreach(lambda _: time.sleep(0.5))


def test_a_long_read_shows_its_tasks_on_one_line_and_clears_it(
    spark: Any, terminal: tuple[TextIO, int]
) -> None:
    out, reader = terminal
    with progress(spark, "operator 0", out=out, after=0.1, every=0.05):
        _slow_job(spark)
    shown = _shown(reader)
    lines = [part for part in shown.split("\r\x1b[K") if part]
    assert lines, repr(shown)
    counts = []
    for line in lines:
        shape = re.fullmatch(r"reading operator 0: \[([#.]{20})\] (\d)/4 tasks", line)
        assert shape is not None, line
        assert shape.group(1).count("#") == 20 * int(shape.group(2)) // TASKS  # the bar agrees
        counts.append(int(shape.group(2)))
    assert counts == sorted(counts), counts  # tasks only ever finish
    assert "\n" not in shown and shown.endswith("\r\x1b[K")  # the line is gone once read


def test_a_read_quicker_than_the_delay_shows_nothing(
    spark: Any, terminal: tuple[TextIO, int]
) -> None:
    out, reader = terminal
    with progress(spark, "operator 0", out=out, after=60):
        _slow_job(spark)
    assert _shown(reader) == ""


def test_a_pipe_gets_no_progress_line(spark: Any) -> None:
    piped = io.StringIO()
    with progress(spark, "operator 0", out=piped, after=0, every=0.05):
        _slow_job(spark)
    assert piped.getvalue() == ""
