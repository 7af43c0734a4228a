"""A real ``sparkwatch collector`` process serving the benchmark's history through its read API.

Its jobs are off (retention would delete the month of raw rows, rollups would rewrite the
population) and nothing is ingested: only the read endpoints are used.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.local import free_port

START_TIMEOUT_S = 60.0
POLL_S = 0.1


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
            _wait_healthy(proc, base + "/healthz", log)
            yield base
        finally:
            _stop(proc)


def _wait_healthy(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise CollectorFailed(f"collector exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise CollectorFailed(f"collector not healthy after {START_TIMEOUT_S:.0f} s: "
                                  f"{log.read_text()[-2000:]}")
        time.sleep(POLL_S)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
