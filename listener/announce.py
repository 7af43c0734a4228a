"""The attach and stop lines: one line each on stderr, so a user can tell attach worked.

Printed, not logged: under ``spark-submit`` nobody configures Python logging and INFO records
vanish, which left attach silent. Secrets go through :mod:`sparkwatch.redact`.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from typing import TextIO

from sparkwatch.httpopen import url_host
from sparkwatch.redact import redact_url
from sparkwatch.terminal import printable


@dataclass(frozen=True, slots=True)
class Destinations:
    """Where one attachment sends what it sees; None: that output is off."""

    app_id: str
    mode: str
    version: str
    metrics_address: str | None
    metrics_port: int | None
    history_url: str | None
    push_url: str | None
    otlp: str | None = None
    """where OTLP export goes (endpoint and protocol), None when it is off"""


def attach_line(d: Destinations) -> str:
    if d.metrics_port is None:
        metrics = "metrics off"
    else:
        # 0.0.0.0 binds every interface; localhost is what a user on the driver can curl.
        address = d.metrics_address or ""
        wildcard = address in ("0.0.0.0", "::", "")  # nosec B104 - a test, no bind
        host = "localhost" if wildcard else url_host(address)
        metrics = f"metrics http://{host}:{d.metrics_port}/metrics"
    history = f"history {redact_url(d.history_url)}" if d.history_url else "history off"
    push = f"push {redact_url(d.push_url)}" if d.push_url else "push off"
    # OTLP is named only when on: it is an extra most installs do not have.
    otlp = f", otlp {d.otlp}" if d.otlp else ""
    return f"sparkwatch {d.version} attached to {d.app_id} ({d.mode} mode): {metrics}, " \
        f"{history}, {push}{otlp}"


def disabled_line(app_id: str, version: str) -> str:
    return f"sparkwatch {version} not attached to {app_id}: disabled (SPARKWATCH_ENABLED=false " \
        "or spark.sparkwatch.enabled=false)"


def stop_line(app_id: str, received: int, dropped: int, bus_dropped: int | None = None,
              unfinished: int = 0) -> str:
    """``unfinished``: events a stage still held when the stop's deadline came (queued, or
    being written or pushed), neither delivered nor dropped yet: with them every event received
    is accounted for. Left to daemon threads, they are lost if the process exits now."""
    line = f"sparkwatch stopped for {app_id}: {received} events received, {dropped} dropped"
    if unfinished:
        line += f", {unfinished} unfinished at the stop deadline"
    if bus_dropped:
        line += f" (Spark's listener bus dropped {bus_dropped} events for all listeners)"
    return line


MAX_LINE_CHARS = 2000
"""The longest line :func:`announce` writes: a setting's error quotes its value, and a 1 MB
``SPARKWATCH_*`` value made a 1 MB line in the app's stderr."""


def announced(line: str) -> str:
    """``line`` as :func:`announce` writes it: one line of text, a character a terminal would act
    on (a newline in a value, an escape sequence, bytes that were not UTF-8) shown as its escape
    (:func:`~sparkwatch.terminal.printable`), at most :data:`MAX_LINE_CHARS` characters."""
    cut = printable(line[:MAX_LINE_CHARS * 2])
    if len(cut) > MAX_LINE_CHARS or len(line) > len(cut):
        cut = f"{cut[:MAX_LINE_CHARS - 30]}… ({len(line)} characters in all)"
    return cut


def announce(line: str, stream: TextIO | None = None) -> None:
    """Write one line; a closed or broken stderr never stops the app."""
    out = stream if stream is not None else sys.stderr
    with contextlib.suppress(OSError, ValueError):
        print(announced(line), file=out, flush=True)
