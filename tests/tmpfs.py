"""A real small filesystem for disk-full tests: a tmpfs of a few MiB mounted for one test (CI runs
as root), and a filler file that takes its free space and gives it back."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import unavailable

CHUNK = 64 << 10


@contextmanager
def small_filesystem(directory: Path, size: str = "2m") -> Iterator[Path]:
    """``directory`` with a tmpfs of ``size`` mounted on it, unmounted afterwards."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(directory)], capture_output=True, text=True)
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


class Filler:
    """A file that takes all the free space of its filesystem but ``leave`` bytes."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fill(self, leave: int = 0) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            while True:
                os.write(fd, b"\xff" * CHUNK)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        try:  # what fits in less than a chunk
            while True:
                os.write(fd, b"\xff" * 512)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
        finally:
            if leave:
                os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave))
            os.close(fd)

    def free(self) -> None:
        self.path.unlink(missing_ok=True)


def free_bytes(directory: Path) -> int:
    stat = os.statvfs(directory)
    return stat.f_bavail * stat.f_frsize
