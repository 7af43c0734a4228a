"""Child processes of the benchmarks (collector, Pushgateway, py-spy) and what /proc says
about them: CPU seconds and resident memory."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PR_SET_PDEATHSIG = 1
POLL_S = 0.05


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
            status = _status(each)
            cpu += cpu_seconds(each)
        except OSError:  # a child that ended between listing and reading
            continue
        rss += _kib(status, "VmRSS") / 1024
        peak += _kib(status, "VmHWM") / 1024
    return ProcStats(cpu, rss, peak)


def _status(pid: int) -> dict[str, str]:
    status = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    return status


def _kib(status: dict[str, str], key: str) -> int:
    return int(status.get(key, "0 kB").split()[0])


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
