"""Child processes of the benchmarks (collector, Pushgateway, py-spy) and what /proc says
about them: CPU seconds and resident memory; a ``sparkwatch collector`` on a free port."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.local import free_port

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG = 1
POLL_S = 0.05
START_TIMEOUT_S = 60.0


class ProcessFailed(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class ProcStats:
    cpu_s: float
    """user + system CPU of every thread of the process and its live children since they started"""
    rss_mib: float
    peak_rss_mib: float



def cpu_seconds(pid: int) -> float:
    # Fields after the command name (which may hold spaces): utime and stime are 14th and 15th.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def descendants(pid: int) -> list[int]:
    """Live child processes of ``pid``, recursively (the collector's history writer)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:  # the thread or process ended meanwhile
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def proc_stats(pid: int) -> ProcStats:
    """The process and its live children together: CPU and RSS summed, the peak as the sum of
    each process's own peak (an upper bound of their peak together)."""
    cpu = rss = peak = 0.0
    for each in [pid, *descendants(pid)]:
        try:
            fields = status(each)
            cpu += cpu_seconds(each)
        except OSError:  # a child that ended between listing and reading
            continue
        rss += kib(fields, "VmRSS") / 1024
        peak += kib(fields, "VmHWM") / 1024
    return ProcStats(cpu, rss, peak)


def status(pid: int) -> dict[str, str]:
    """``/proc/<pid>/status`` as a mapping (``VmRSS``, ``VmHWM``, ... with their units)."""
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    return status


def kib(fields: dict[str, str], key: str) -> int:
    return int(fields.get(key, "0 kB").split()[0])


def _die_with_parent() -> None:
    # A benchmark killed with SIGKILL must not leave a collector or Pushgateway behind.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(args: Sequence[str], log: Path, env: Mapping[str, str] | None = None,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT,
                                env=None if env is None else dict(env), cwd=cwd,
                                preexec_fn=_die_with_parent)


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``condition`` until true; the monotonic time it was seen true. Raises after
    ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise ProcessFailed(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def wait_serving(proc: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
    """Until ``url`` answers 200; fails at once, with the log's tail, if the process exits."""
    def up() -> bool:
        if proc.poll() is not None:
            raise ProcessFailed(f"{proc.args!r} exited {proc.returncode}: {tail(log)}")
        try:
            return httpx.get(url, timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(up, timeout, f"{url} (log {log})")


def tail(log: Path, chars: int = 2000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


@contextmanager
def serving(args: Sequence[str], url: str, log: Path, env: Mapping[str, str] | None = None,
            cwd: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``args`` started, once ``url`` (its health check) answers 200; stopped (TERM, then KILL)
    on exit."""
    proc = spawn(args, log, env, cwd)
    try:
        wait_serving(proc, url, log, START_TIMEOUT_S)
        yield proc
    finally:
        stop(proc)


@contextmanager
def collector(workdir: Path, *flags: str, tokens: str | None = None,
              python: str | None = None) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``sparkwatch collector *flags`` on a free localhost port, its spool and log in
    ``workdir``, ``tokens`` (``SPARKWATCH_COLLECTOR_TOKENS``) in its environment, never on its
    command line; the process and its base URL. ``python``: another interpreter (a virtualenv
    holding another build), run from ``workdir`` so that this checkout does not shadow it."""
    port = free_port()
    args = [python or sys.executable, "-m", "sparkwatch.cli.main", "collector",
            "--host", "127.0.0.1", "--port", str(port), "--spool-dir", str(workdir / "spool"),
            *flags]
    env = {**os.environ, **({"SPARKWATCH_COLLECTOR_TOKENS": tokens} if tokens else {})}
    url = f"http://127.0.0.1:{port}"
    with serving(args, url + "/healthz", workdir / "collector.log", env,
                 cwd=workdir if python else None) as proc:
        yield proc, url
