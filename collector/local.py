"""A collector in a child process on localhost, for ``sparkwatch demo --collector``.

A real ``sparkwatch collector`` process (not a thread of the demo): the demo then shows exactly
what production does, pushes over HTTP included. The token is random and passed by environment.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sparkwatch.httpopen import open_http
from sparkwatch.model.answers import is_ingest_result

START_SECONDS = 30.0


class LocalCollectorError(RuntimeError):
    """The collector did not come up; the message holds the end of its log."""


@dataclass(frozen=True, slots=True)
class LocalCollector:
    url: str
    token: str

    @property
    def ingest_url(self) -> str:
        return self.url + "/api/v1/events"


@contextmanager
def local_collector(history_url: str | None, port: int) -> Iterator[LocalCollector]:
    """Start ``sparkwatch collector`` on 127.0.0.1:``port``, yield it, stop it (SIGTERM)."""
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="sparkwatch-collector-") as tmp:
        log_path = Path(tmp) / "collector.log"
        args = [sys.executable, "-m", "sparkwatch.cli.main", "collector", "--host", "127.0.0.1",
                "--port", str(port), "--spool-dir", str(Path(tmp) / "spool")]
        # Secrets by environment, not argv: any local user can read a command line in `ps`.
        env = {**os.environ, "SPARKWATCH_COLLECTOR_TOKENS": f"*={token}",
               "SPARKWATCH_COLLECTOR_HISTORY_URL": history_url or "off"}
        with open(log_path, "wb") as log:
            # Its own session: the terminal's Ctrl-C stops the demo, which then stops the
            # collector after the last events were pushed.
            proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, preexec_fn=_die_with_parent)
        collector = LocalCollector(f"http://127.0.0.1:{port}", token)
        try:
            _wait_healthy(proc, collector, log_path)
            yield collector
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the demo dies, even by SIGKILL (Linux), so that no
    collector outlives it holding the port."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _wait_healthy(proc: subprocess.Popen[bytes], collector: LocalCollector,
                  log_path: Path) -> None:
    """Until our collector answers an (empty) ingest with our token. Another service on the port
    answers too (/healthz, or a 200 to any POST): an answer counts only when it is ours, the
    collector's count of an empty batch and the request id we sent back in ``X-Request-Id``
    (a random one; the collector echoes it), from a collector process still running. Meanwhile
    ours, finding the port taken, exits: said with its reason and who answers there."""
    deadline = time.monotonic() + START_SECONDS
    request_id = secrets.token_hex(16)
    request = urllib.request.Request(
        collector.ingest_url, b'{"events": []}', method="POST",
        headers={"Authorization": f"Bearer {collector.token}",
                 "Content-Type": "application/json", "X-Request-Id": request_id})
    foreign = False
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            taken = f" (another service answers at {collector.url})" if foreign else ""
            raise LocalCollectorError(f"the collector exited: {_tail(log_path)}{taken}")
        try:
            with open_http(request, timeout=1) as response:
                ours = _ours(response.status, response.headers.get("X-Request-Id"),
                             response.read(4096), request_id)
        except urllib.error.HTTPError as exc:  # an answer outside 2xx: not ours to our token
            exc.close()
            ours = False
        except http.client.HTTPException:  # something answers there, not in HTTP
            ours = False
        except OSError:
            ours = None  # nothing listens yet
        if ours and proc.poll() is None:
            return
        foreign = foreign or ours is False
        time.sleep(0.1)
    proc.kill()
    taken = f"; another service answers at {collector.url}" if foreign else ""
    raise LocalCollectorError(f"the collector did not start in {START_SECONDS:g}s: "
                              f"{_tail(log_path)}{taken}")


def _ours(status: int, echoed: str | None, body: bytes, request_id: str) -> bool:
    """Whether an answer to the empty ingest is our collector's: 200, our request id echoed, and
    its count of the batch (:func:`is_ingest_result`, of nothing accepted and nothing refused:
    ``{"accepted": 0, "duplicates": 0, "rejected": []}``)."""
    if status != 200 or echoed != request_id:
        return False
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return is_ingest_result(value) and value["accepted"] == 0 and value["rejected"] == []


def _tail(path: Path) -> str:
    """The collector's last error line, its reason to stop (a port in use, a database it cannot
    reach), else its last line (a settings error, said on its own): uvicorn logs its shutdown
    after the error, and "Application shutdown complete." tells the user nothing."""
    lines = path.read_text(errors="replace").strip().splitlines()
    errors = [line for line in lines if _level(line) in ("ERROR", "CRITICAL")]
    return (errors or lines or ["(no output)"])[-1]


def _level(line: str) -> str:
    """The level of a line in the one log format (``sparkwatch.logs.LOG_FORMAT``: date, time,
    level, ...); anything else has none."""
    parts = line.split(" ", 3)
    return parts[2] if len(parts) > 3 else ""
