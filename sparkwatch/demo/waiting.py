"""Waiting on a condition with a deadline (no sleep stands in for a condition)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes; True when it held."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        pause.wait(min(interval, remaining))
    return True
