"""What a page says about a failure it cannot show in full.

A history's error carries its database's host, port and name, a file path or a setting's name:
the console's readers (a tenant's, or whoever reaches a driver's port) see a generic line with a
reference; the detail goes to the server's log under the same reference, once per distinct
detail (a page reloaded every 5 seconds against a stopped database would flood the log)."""

from __future__ import annotations

import hashlib
import logging
import threading

from sparkwatch.summary import one_line

log = logging.getLogger("sparkwatch.console")

_logged: set[str] = set()
_lock = threading.Lock()
MAX_REMEMBERED = 1000


def hidden(what: str, exc: BaseException, where: str = "the driver's log") -> str:
    """``what`` for the page, pointing at ``where`` the detail was logged (under a reference
    that is the same for the same detail, so repeats are logged once)."""
    detail = f"{type(exc).__name__}: {one_line(exc)}"
    ref = hashlib.sha256(f"{what}\n{detail}".encode()).hexdigest()[:10]
    with _lock:
        first = ref not in _logged
        if first:
            if len(_logged) >= MAX_REMEMBERED:
                _logged.clear()
            _logged.add(ref)
    if first:
        log.warning("console: %s (ref %s): %s", what, ref, detail)
    return f"{what}; {where} says why (ref {ref})"
