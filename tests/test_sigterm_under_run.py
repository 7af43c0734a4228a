"""SIGTERM under `sparkwatch run` before any session is attached: the handler the bootstrap puts
on SIGTERM as Python starts (so that a session built later on any thread can exit through
atexit) keeps the default action until then; an app started with SIGTERM ignored keeps it
ignored; an app's own handler that passes the signal on to the one it replaced decides alone."""

from __future__ import annotations

import signal
import subprocess
import sys

from sparkwatch.cli.run import child_environment
from tests.support import unmeasured
from tests.test_run import SPARKWATCH, clean_env


def run_until_ready(child: str, ignore_sigterm: bool = False) -> subprocess.Popen[str]:
    """``child`` under ``sparkwatch run``; with ``ignore_sigterm``, started with SIGTERM ignored
    and the bootstrap on its PYTHONPATH directly (cluster deploy mode's way): `sparkwatch run`
    itself handles SIGTERM, so what it starts has the default action."""
    env = unmeasured(clean_env())  # coverage's SIGTERM handler would be there first
    if not ignore_sigterm:
        return subprocess.Popen([*SPARKWATCH, "run", "--", sys.executable, "-c", child],
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ignoring() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    return subprocess.Popen([sys.executable, "-c", child], env=child_environment(env),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            preexec_fn=ignoring)


def signalled(proc: subprocess.Popen[str]) -> tuple[str, int, str]:
    """The first line ``proc`` printed; then, SIGTERM sent and its stdin closed, its exit
    status and the rest."""
    try:
        assert proc.stdin is not None and proc.stdout is not None
        first = proc.stdout.readline().strip()
        proc.send_signal(signal.SIGTERM)
        proc.stdin.close()
        code = proc.wait(timeout=30)
        return first, code, proc.stdout.read().strip()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# Waits for its stdin's end, which comes after the signal (signal.pause() after the print missed
# a signal come in between, and waited for good).
WAITS = "import sys\nprint(handler, flush=True)\nsys.stdin.read()\nprint('survived', flush=True)\n"


def test_an_app_with_no_session_is_ended_by_sigterm_as_without_sparkwatch() -> None:
    child = "import signal\nhandler = signal.getsignal(signal.SIGTERM).__name__\n" + WAITS
    first, code, rest = signalled(run_until_ready(child))
    # The bootstrap's handler is what the app sees (the documented cost), and it did what the
    # default action does: the process ended by SIGTERM, no exit status of its own, no line.
    assert (first, code, rest) == ("_on_sigterm", -signal.SIGTERM, "")


def test_an_app_started_with_sigterm_ignored_keeps_it_ignored() -> None:
    # Ignored, the signal changes nothing: the app reads its stdin to the end.
    child = ("import signal, sys\nhandler = signal.getsignal(signal.SIGTERM) is signal.SIG_IGN\n"
             + WAITS)
    first, code, rest = signalled(run_until_ready(child, ignore_sigterm=True))
    assert (first, code, rest) == ("True", 0, "survived")


def test_an_apps_handler_that_passes_sigterm_on_decides_alone() -> None:
    # A common pattern: note the stop, then call the handler replaced if it is callable. The
    # default action is not: the app would go on to its own clean end, and so it does.
    child = (
        "import signal, sys\n"
        "def mine(signum, frame):\n"
        "    print('noted', flush=True)\n"
        "    if callable(previous):\n"
        "        previous(signum, frame)\n"
        "previous = signal.signal(signal.SIGTERM, mine)\n"
        "handler = previous.__name__\n" + WAITS + "sys.exit(7)\n"
    )
    first, code, rest = signalled(run_until_ready(child))
    assert (first, code, rest.split()) == ("_on_sigterm", 7, ["noted", "survived"])
