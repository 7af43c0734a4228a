"""A real ``sparkwatch collector`` process serving the benchmark's history through its read API.

Its jobs are off (retention would delete the month of raw rows, rollups would rewrite the
population) and nothing is ingested: only the read endpoints are used.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench import procs


@contextmanager
def collector(history_url: str) -> Iterator[str]:
    """The base URL of a collector reading ``history_url``; stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp, procs.collector(
            Path(tmp), "--history-url", history_url, "--no-history-migrate", "--no-jobs-enabled",
            "--no-auth") as (_, url):
        yield url
