"""`sparkwatch run` called from a thread that is not Python's main one (an orchestrator that
embeds ``main()``): the command runs as it does from the main thread, with SIGPIPE and SIGXFSZ at
their default action, and a command that cannot be run leaves the caller's signals as they were.
Python allows ``signal.signal`` on the main thread only; this used to be a ValueError traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkwatch.cli.main import main
from tests.test_run import clean_env

# The caller: main() on a worker thread, its main thread waiting for it. A successful exec
# replaces the whole process, as it does from the main thread.
FROM_A_THREAD = """\
import sys, threading
from sparkwatch.cli.main import main
ended = []
worker = threading.Thread(target=lambda: ended.append(main(sys.argv[1:])))
worker.start()
worker.join()
raise SystemExit(ended[0] if ended else 99)
"""


def ignored_mask() -> int:
    """The signals this process ignores, as the kernel has them (not Python's own table)."""
    line = next(line for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("SigIgn:"))
    return int(line.split()[1], 16)


def test_a_command_run_from_a_thread_starts_with_sigpipe_at_its_default() -> None:
    """`yes | head` from a thread: `yes` ends quietly by SIGPIPE once `head` has its lines, as
    without sparkwatch. With SIGPIPE left ignored it said "Broken pipe" (a shell cannot put back
    a signal it was started ignoring)."""
    done = subprocess.run([sys.executable, "-c", FROM_A_THREAD, "run", "--", "sh", "-c",
                           "yes | head -n 2"],
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "y\ny\n", "")


def test_a_command_run_from_a_thread_has_its_exit_status() -> None:
    done = subprocess.run([sys.executable, "-c", FROM_A_THREAD, "run", "--", sys.executable,
                           "-c", "raise SystemExit(7)"],
                          env=clean_env(), capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (7, "")


@pytest.fixture
def ignored_as_python_starts() -> Iterator[None]:
    """SIGPIPE and SIGXFSZ ignored, as Python has them from its start (a test before this one in
    the same process may have set them otherwise); what they were is put back after."""
    signals = (signal.SIGPIPE, signal.SIGXFSZ)
    was = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    yield
    for sig, action in was.items():
        signal.signal(sig, action)


@pytest.mark.usefixtures("ignored_as_python_starts")
def test_a_missing_command_from_a_thread_is_127_and_leaves_the_signals_as_they_were(
        ) -> None:
    before = ({sig: signal.getsignal(sig) for sig in (signal.SIGPIPE, signal.SIGXFSZ)},
              ignored_mask())
    assert before[1] & (1 << (signal.SIGPIPE - 1))
    statuses: list[int] = []
    worker = threading.Thread(
        target=lambda: statuses.append(main(["run", "--", "no-such-command-sparkwatch"])))
    worker.start()
    worker.join(timeout=60)
    assert statuses == [127]
    after = ({sig: signal.getsignal(sig) for sig in (signal.SIGPIPE, signal.SIGXFSZ)},
             ignored_mask())
    assert after == before
