"""A real ``sparkwatch collector`` process serving the benchmark's history through its read API.

Its jobs are off (retention would delete the month of raw rows, rollups would rewrite the
population) and nothing is ingested: only the read endpoints are used.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.local import free_port
from bench.procs import ProcessFailed, stop, wait_serving

START_TIMEOUT_S = 60.0


class CollectorFailed(RuntimeError):
    pass



@contextmanager
def collector(history_url: str) -> Iterator[str]:
    """The base URL of a collector reading ``history_url``; stopped on exit."""
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        port, log = free_port(), Path(tmp) / "collector.log"
        args = [sys.executable, "-m", "sparkwatch.cli.main", "collector", "--host", "127.0.0.1",
                "--port", str(port), "--history-url", history_url, "--no-history-migrate",
                "--no-jobs-enabled", "--no-auth", "--spool-dir", f"{tmp}/spool"]
        with log.open("ab") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            try:
                wait_serving(proc, base + "/healthz", log, START_TIMEOUT_S)
            except ProcessFailed as exc:
                raise CollectorFailed(str(exc)) from None
            yield base
        finally:
            stop(proc, timeout=15)
