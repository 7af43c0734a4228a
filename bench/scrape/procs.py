"""The two servers the scrape bench measures, as real processes on free localhost ports: a
``sparkwatch collector`` and a Prometheus Pushgateway; plus their memory from /proc."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench import procs
from bench.local import free_port
from bench.procs import ProcessFailed, kib, status, tail

PUSHGATEWAY = "/usr/bin/prometheus-pushgateway"


@dataclass(frozen=True, slots=True)
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def memory(self) -> dict[str, int]:
        """VmRSS (now) and VmHWM (peak) in bytes."""
        fields = status(self.proc.pid)
        return {key: kib(fields, key) * 1024 for key in ("VmRSS", "VmHWM")}

    def check(self) -> None:
        """Raise :class:`ProcessFailed`, with the end of its log, if the process has exited."""
        if self.proc.poll() is not None:
            raise ProcessFailed(f"{self.name} exited {self.proc.returncode}:\n{tail(self.log)}")


@contextmanager
def serving(name: str, args: Sequence[str], url: str, health_path: str,
            log: Path) -> Iterator[Server]:
    """Start ``args``, wait until ``health_path`` answers 200, stop it (TERM, then KILL) after."""
    with procs.serving(args, url + health_path, log) as proc:
        yield Server(name, proc, url, log)


@dataclass(frozen=True, slots=True)
class CollectorSpec:
    workdir: Path
    token: str
    max_apps: int
    max_queries_per_app: int
    max_queries: int
    """The tenant's cap: every app of the fleet pushes as the one default tenant."""
    history_url: str = "off"
    metrics_profile: str = "full"
    """The Pushgateway comparison serves the whole catalogue unless told otherwise."""


@contextmanager
def collector(spec: CollectorSpec) -> Iterator[Server]:
    """``sparkwatch collector`` with caps raised to the fleet's size (and the token in its env,
    never on the command line)."""
    flags = ["--history-url", spec.history_url, "--max-apps", str(spec.max_apps),
             "--max-queries-per-app", str(spec.max_queries_per_app),
             "--max-queries", str(spec.max_queries),
             # Every event is pushed within seconds, but 10,000 queries take a while to load:
             # nothing may be evicted as stale before the scrapes.
             "--stale-seconds", "86400", "--metrics-profile", spec.metrics_profile]
    with procs.collector(spec.workdir, *flags, tokens=f"*={spec.token}") as (proc, url):
        yield Server("collector", proc, url, spec.workdir / "collector.log")


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
