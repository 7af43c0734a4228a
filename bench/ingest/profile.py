"""py-spy on the collector during a run, and a per-thread summary of where its CPU goes.

``py-spy record --format raw --threads`` writes collapsed stacks (``thread (tid): name;frame;...
;frame N``, outermost first, idle threads left out); the summary groups them by what the thread
does (the history pump, the request worker threads, the event loop) and lists the functions, line
numbers folded, with the most samples on the stack's top (own) and anywhere on it (cumulative).
Samples caught waiting on a lock or queue (py-spy's idle detection misses some) are counted apart.
"""

from __future__ import annotations

import re
import shutil
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.procs import spawn, stop

RATE = 100
TOP = 15
# A thread's role, by its name, else by a frame on its stack (py-spy misses some names).
ROLES = (
    ("history pump thread (collector-history)", "collector-history", "collector/pump.py"),
    ("request worker threads (AnyIO)", "AnyIO worker thread", "anyio/_backends"),
    ("executor threads (ThreadPoolExecutor)", "ThreadPoolExecutor", "concurrent/futures"),
    ("scheduler (APScheduler)", "APScheduler", "apscheduler"),
    ("event loop (MainThread: uvicorn on uvloop)", "MainThread", "uvicorn/server.py"),
)
WAITS = ("Condition.wait (", "Event.wait (", "Queue.get (", "_worker (concurrent/futures/")
LINE = re.compile(r":\d+\)$")
# Frames every stack of a thread has: left out of the cumulative list.
SCAFFOLD = ("(threading.py)", "(<frozen runpy>)", "WorkerThread.run (", "(sparkwatch/cli/main.py)")


@dataclass
class ThreadProfile:
    samples: int = 0
    waiting: int = 0
    threads: set[str] = field(default_factory=set)
    own: Counter[str] = field(default_factory=Counter)
    cumulative: Counter[str] = field(default_factory=Counter)


def available() -> str | None:
    return None if shutil.which("py-spy") else "py-spy not installed"


@contextmanager
def recording(pid: int, out: Path) -> Iterator[None]:
    """Samples ``pid`` until the block ends (py-spy writes its file on SIGINT)."""
    proc = spawn(["py-spy", "record", "--pid", str(pid), "--format", "raw", "--threads",
                  "--rate", str(RATE), "--output", str(out)], out.with_suffix(".log"))
    try:
        yield
    finally:
        stop(proc, signal.SIGINT, timeout=60)


def role(thread: str, frames: list[str]) -> str:
    name = thread.partition(": ")[2]
    for title, thread_name, _ in ROLES:
        if name.startswith(thread_name):
            return title
    for title, _, marker in ROLES:
        if any(marker in f for f in frames):
            return title
    return name or "other threads"


def parse(raw: str) -> dict[str, ThreadProfile]:
    profiles: dict[str, ThreadProfile] = {}
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        thread, *frames = stack.split(";")
        frames = [LINE.sub(")", f) for f in frames]
        profile = profiles.setdefault(role(thread, frames), ThreadProfile())
        profile.threads.add(thread.partition(":")[0])
        n = int(count)
        if frames and frames[-1].startswith(WAITS):
            profile.waiting += n
            continue
        profile.samples += n
        if frames:
            profile.own[frames[-1]] += n
        for frame in set(frames):
            if not frame.endswith(SCAFFOLD) and not frame.startswith(SCAFFOLD):
                profile.cumulative[frame] += n
    return profiles


def summary(profiles: dict[str, ThreadProfile], top: int = TOP) -> str:
    total = sum(p.samples for p in profiles.values()) or 1
    parts = [f"{total} busy samples at {RATE} Hz (% of all busy samples; waits left out)"]
    for name, p in sorted(profiles.items(), key=lambda kv: -kv[1].samples):
        parts.append(f"\n## {name}, {len(p.threads)} thread(s): {p.samples} busy samples "
                     f"({100 * p.samples / total:.0f} %), {p.waiting} waiting")
        if not p.samples:
            continue
        for title, counter in (("own", p.own), ("cumulative", p.cumulative)):
            parts.append(f"  top by {title} samples (% of this group's busy samples):")
            parts += [f"    {100 * n / max(p.samples, 1):5.1f} %  {frame}"
                      for frame, n in counter.most_common(top)]
    return "\n".join(parts)


def summarize_file(raw: Path) -> str:
    return summary(parse(raw.read_text(errors="replace")))
