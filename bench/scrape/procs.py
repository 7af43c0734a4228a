"""The two servers the scrape bench measures, as real processes on free localhost ports: a
``sparkwatch collector`` and a Prometheus Pushgateway; plus their memory from /proc."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.local import free_port
from bench.procs import ProcessFailed, stop, wait_serving

PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"
START_TIMEOUT_S = 60.0


class ServerFailed(RuntimeError):
    pass



@dataclass(frozen=True, slots=True)
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def memory(self) -> dict[str, int]:
        """VmRSS (now) and VmHWM (peak) in bytes."""
        return memory(self.proc.pid)

    def check(self) -> None:
        """Raise :class:`ServerFailed`, with the end of its log, if the process has exited."""
        if self.proc.poll() is not None:
            raise ServerFailed(f"{self.name} exited {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def memory(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out


@contextmanager
def serving(name: str, args: Sequence[str], url: str, health_path: str, log: Path,
            env: dict[str, str] | None = None) -> Iterator[Server]:
    """Start ``args``, wait until ``health_path`` answers 200, stop it (TERM, then KILL) after."""
    with log.open("ab") as out:
        proc = subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})
    server = Server(name, proc, url, log)
    try:
        try:
            wait_serving(proc, url + health_path, log, START_TIMEOUT_S)
        except ProcessFailed as exc:
            raise ServerFailed(f"{name}: {exc}") from None
        yield server
    finally:
        stop(proc, timeout=15)


@dataclass(frozen=True, slots=True)
class CollectorSpec:
    workdir: Path
    token: str
    max_apps: int
    max_queries_per_app: int
    history_url: str = "off"
    metrics_profile: str = "full"
    """The Pushgateway comparison serves the whole catalogue unless told otherwise."""


def collector(spec: CollectorSpec) -> AbstractContextManager[Server]:
    """``sparkwatch collector`` with caps raised to the fleet's size (and the token in its env,
    never on the command line)."""
    port = free_port()
    args = [
        sys.executable, "-m", "sparkwatch.cli.main", "collector", "--host", "127.0.0.1",
        "--port", str(port), "--history-url", spec.history_url,
        "--spool-dir", str(spec.workdir / "spool"), "--max-apps", str(spec.max_apps),
        "--max-queries-per-app", str(spec.max_queries_per_app),
        # Every event is pushed within seconds, but 10,000 queries take a while to load:
        # nothing may be evicted as stale before the scrapes.
        "--stale-seconds", "86400", "--metrics-profile", spec.metrics_profile,
    ]
    env = {"SPARKWATCH_COLLECTOR_TOKENS": f"*={spec.token}"}
    return serving("collector", args, f"http://127.0.0.1:{port}", "/healthz",
                   spec.workdir / "collector.log", env)


def pushgateway(workdir: Path, binary: str = PUSHGATEWAY,
                check_pushes: bool = False) -> AbstractContextManager[Server]:
    """Pushgateway in memory only (Debian's default persists to /var/lib).

    Its push-time consistency check gathers everything it holds on every push, so loading
    1,000 per-query groups takes many minutes and 10,000 would take hours; it is off unless
    ``check_pushes``. Scrapes are unaffected: serving /metrics runs the same checks anyway."""
    port = free_port()
    args = [binary, f"--web.listen-address=127.0.0.1:{port}", "--persistence.file=",
            "--log.level=warn"]
    if not check_pushes:
        args.append("--push.disable-consistency-check")
    return serving("pushgateway", args, f"http://127.0.0.1:{port}", "/-/healthy",
                   workdir / "pushgateway.log")
