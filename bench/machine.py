"""What the figures were measured on (recorded next to them in docs/benchmarks.md)."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return None


def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (out.stderr or out.stdout).splitlines()
    return lines[0].strip() if lines else "unknown"


def code_version() -> str:
    """The commit measured, marked ``-dirty`` when the working tree differs from it."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                             text=True, timeout=30, cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def describe() -> dict[str, object]:
    ram = ram_gib()
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "ram": f"{ram:.1f} GiB" if ram else "unknown",
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "java": java_version(),
        "kernel": platform.release(),
        "code": code_version(),
    }


def provenance(argv: list[str], m: Mapping[str, object], machine_tail: str = "") -> list[str]:
    """The date, command and machine lines every recorded block starts with (``m`` from
    :func:`describe`); ``machine_tail`` ends the machine line."""
    return [
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- command: `{shlex.join(['python', '-m', 'bench', *argv])}` (code `{m['code']}`)",
        f"- machine: {m['nproc']} CPUs ({m['cpu']}), {m['ram']} RAM, Linux {m['kernel']}"
        + machine_tail,
    ]
