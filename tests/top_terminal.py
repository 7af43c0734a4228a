"""Driving `sparkwatch top` through a pseudo-terminal (pexpect): spawn it, read whole frames,
press keys. A frame ends with the clear-to-end-of-screen sequence the screen writes after it."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pexpect

from tests.support import unmeasured

FRAME_END = "\x1b[J"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
WIDTH, HEIGHT = 160, 60


def spawn(*args: str, measured: bool = True) -> pexpect.spawn:
    """``measured=False``: without the suite's subprocess coverage (see support.unmeasured)."""
    base = dict(os.environ) if measured else unmeasured(dict(os.environ))
    env = {**base, "COLUMNS": str(WIDTH), "LINES": str(HEIGHT), "TERM": "xterm"}
    return pexpect.spawn(
        sys.executable, ["-m", "sparkwatch.cli.main", "top", *args], env=env,
        dimensions=(HEIGHT, WIDTH), encoding="utf-8", timeout=30,
    )


@contextmanager
def running_top(*args: str) -> Iterator[pexpect.spawn]:
    """``sparkwatch top *args`` in a pseudo-terminal, killed on the way out if still running."""
    child = spawn(*args)
    try:
        yield child
    finally:
        if child.isalive():
            child.terminate(force=True)


def quit_top(child: pexpect.spawn) -> int:
    """Press q; the exit status once top has ended."""
    child.send("q")
    child.wait()
    return int(child.exitstatus)


def next_frame(child: pexpect.spawn, timeout: float = 30) -> list[str]:
    child.expect_exact(FRAME_END, timeout=timeout)
    text = _ESCAPES.sub("", child.before or "")
    return [line.rstrip("\r") for line in text.split("\n") if line.strip("\r")]


def wait_frame(
    child: pexpect.spawn, ok: Callable[[list[str]], bool], what: str, timeout: float = 60
) -> list[str]:
    deadline = time.monotonic() + timeout
    lines: list[str] = []
    while time.monotonic() < deadline:
        lines = next_frame(child, max(1.0, deadline - time.monotonic()))
        if ok(lines):
            return lines
    last = "\n".join(lines)
    raise AssertionError(f"no frame with {what} within {timeout}s; last frame:\n{last}")


def query_rows(lines: list[str]) -> list[list[str]]:
    """The cells of the query lines (marked by '>' or two spaces, not operator lines)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("QUERY / OPERATOR"))
    out = []
    for line in lines[start + 1 :]:
        if re.match(r"^[> ] \S", line):
            out.append(line[2:].split())
    return out


def has(text: str) -> Callable[[list[str]], bool]:
    return lambda lines: any(text in line for line in lines)
