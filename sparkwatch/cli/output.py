"""Writing a command's answer to stdout when its reader may leave early (`| head -1`)."""

from __future__ import annotations

import os
import sys


def print_answer(text: str) -> None:
    """``print(text)``, flushed; a reader that has gone is ignored (stdout then points at
    /dev/null). For a command whose exit status is its verdict (doctor's gate): a BrokenPipeError
    that reached main() ended it with main()'s quiet 0 instead."""
    try:
        print(text)
        sys.stdout.flush()  # now, while the verdict is in hand, not in the interpreter's exit
    except BrokenPipeError:
        silence_stdout()


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
