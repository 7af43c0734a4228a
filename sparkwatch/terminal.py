"""Drawing on a terminal, shared by ``sparkwatch demo`` and ``sparkwatch top``: value formats
that fit narrow columns, and a :class:`Screen` that redraws in place on a terminal and writes
spaced snapshots to a pipe."""

from __future__ import annotations

import math
import os
import shutil
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from typing import TextIO

RESET, BOLD, DIM = "\x1b[0m", "\x1b[1m", "\x1b[2m"


# --- values ---------------------------------------------------------------------------


def fmt_count(n: float | None) -> str:
    if n is None or not math.isfinite(n):
        return "-"
    if abs(n) < 1_000_000:
        return str(int(n))
    for unit, scale in (("M", 1e6), ("G", 1e9)):
        shown = f"{n / scale:.3g}"
        if abs(float(shown)) < 1000:  # 999.6M rounds to "1e+03": it is 1G
            return shown + unit
    # Past "999G": written so that it fits a column, not cut to another number.
    return _short_exponent(n)


def fmt_batch(batch_id: float | None, digits: int = 15) -> str:
    """A batch id exactly while it has at most ``digits`` digits (a column's width; ids in the
    millions are common), else as :func:`fmt_count` shortens it: 12345678 was cut to its column
    as "123456…", and a peer's 1e308 to the first of its 309 digits."""
    if batch_id is None or not math.isfinite(batch_id):
        return "-"
    return str(int(batch_id)) if abs(batch_id) < 10**digits else fmt_count(batch_id)


def _short_exponent(n: float, unit: str = "", digits: int = 1) -> str:
    """``-9.2e18``: a value from another server too large for any unit, in 8 characters at
    most; it was cut in its column to ``-9.22e+…`` or ``1.8e+29…``, another number."""
    mantissa, exponent = f"{n:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}{unit}"


def fmt_rate(r: float | None) -> str:
    if r is None or not math.isfinite(r):
        return "-"
    return f"{r:.1f}" if abs(r) < 10_000 else fmt_count(r)


def fmt_bytes(n: float | None) -> str:
    if n is None or not 0 <= n < math.inf:  # NaN fails it too
        return "-"
    if n >= 1 << 60:  # past the units: 1e308 was "90949470…" TiB, cut
        return _short_exponent(n, " B")
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"


def fmt_seconds(s: float | None) -> str:
    """A duration in a few characters; None, NaN and infinities (values that come from other
    servers' expositions) as "-", a negative one (a clock stepped back) signed."""
    if s is None or not math.isfinite(s):
        return "-"
    if s < 0:
        return "-" + fmt_seconds(-s)
    if s < 1:
        return f"{s * 1000:.0f}ms"
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    if s < 1000 * 3600:
        return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"
    # Days, then an exponent: a lag of a year was "8760h00m", cut in its column to "8760h0…",
    # and one of 1e308 s to its first digits.
    return f"{int(s // 86400)}d" if s < 100_000 * 86400 else _short_exponent(s, "s", 0)


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on shown as its escape (``\\x1b``,
    ``\\u202e``): names, errors and reasons come from apps and the network, and an ESC, a CR or a
    bidi override in them would rewrite the screen, forge a line or flip what follows. The one
    rule of which characters are shown so: the browser console's pages use it too
    (``sparkwatch/console/markup.py``)."""
    if text.isprintable():  # the common case, at C speed
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def clip(text: str, width: int) -> str:
    """``text`` made printable and cut to ``width`` columns, an ellipsis marking the cut."""
    text = printable(text)
    if display_width(text) <= width:
        return text
    if width <= 0:
        return ""
    kept, used = [], 0
    for c in text:
        used += _columns(c)
        if used > width - 1:
            break
        kept.append(c)
    return "".join(kept) + "…"


def display_width(text: str) -> int:
    """How many terminal columns printable ``text`` takes: a wide or fullwidth character (CJK,
    most emoji) two, a combining mark none. ``len`` counts characters, and a row of Japanese
    names padded by it ran past the screen's edge and wrapped."""
    if text.isascii():  # the common case, at C speed
        return len(text)
    return sum(_columns(c) for c in text)


def _columns(c: str) -> int:
    if unicodedata.category(c) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def ljust(text: str, width: int) -> str:
    """``text`` padded on the right to ``width`` columns (``str.ljust`` counts characters)."""
    return text + " " * (width - display_width(text))


def rjust(text: str, width: int) -> str:
    """``text`` padded on the left to ``width`` columns."""
    return " " * (width - display_width(text)) + text


# --- drawing ------------------------------------------------------------------------------------

CLEAR_SCREEN, HOME, CLEAR_EOL, CLEAR_EOS = "\x1b[2J", "\x1b[H", "\x1b[K", "\x1b[J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


class Screen:
    """Writes frames: redrawn in place on a terminal, every ``snapshot_every`` s to a pipe."""

    def __init__(
        self,
        out: TextIO | None = None,
        tty: bool | None = None,
        snapshot_every: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out if out is not None else sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.snapshot_every = snapshot_every
        self._clock = clock
        self._last_snapshot: float | None = None
        self._started = False

    def size(self) -> tuple[int, int | None]:
        """(width, height); a pipe has no height limit."""
        if self.tty:
            # The terminal's own size, not $COLUMNS/$LINES first as shutil reads them: exported
            # (a shell profile, a tool's child environment), they pinned every frame to the size
            # they said, and a resized window was drawn off its edge.
            try:
                cols, rows = os.get_terminal_size(self.out.fileno())
            except (AttributeError, ValueError, OSError):
                cols, rows = 0, 0
            if cols > 0 and rows > 0:
                return cols, rows
            # A terminal of no size yet (docker exec -t before its first resize, a bare pty):
            # $COLUMNS and $LINES are then how a user sizes it.
            size = shutil.get_terminal_size((120, 40))
            return size.columns, size.lines
        return shutil.get_terminal_size((120, 40)).columns, None

    def show(self, lines: Sequence[str]) -> bool:
        """Draw a frame; on a pipe only when a snapshot is due. True when drawn."""
        if self.tty:
            self._draw_in_place(lines)
            return True
        now = self._clock()
        due = self._last_snapshot is None or now - self._last_snapshot >= self.snapshot_every
        if not due:
            return False
        self._last_snapshot = now
        self.out.write(f"--- {time.strftime('%H:%M:%S')} ---\n" + "\n".join(lines) + "\n")
        self.out.flush()
        return True

    def _draw_in_place(self, lines: Sequence[str]) -> None:
        # One write per frame, each line cleared to its end and the rest of the screen below:
        # nothing is blanked first, so the table never flickers.
        prefix = "" if self._started else HIDE_CURSOR + CLEAR_SCREEN
        self._started = True
        # No newline after the last line: on a frame as tall as the terminal it would scroll the
        # screen by a line at every redraw.
        body = "\n".join(f"{text}{CLEAR_EOL}" for text in lines)
        self.out.write(prefix + HOME + body + CLEAR_EOS)
        self.out.flush()

    def close(self) -> None:
        if self.tty and self._started:
            self.out.write(SHOW_CURSOR)
            self.out.flush()


def run_live(
    frame: Callable[[int, int | None], list[str]],
    screen: Screen,
    stop: threading.Event,
    *,
    interval: float = 1.0,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Redraw ``frame(width, height)`` every ``interval`` s until ``stop`` is set or ``deadline``
    (a ``clock`` time) passes."""
    while True:
        width, height = screen.size()
        screen.show(frame(width, height))
        remaining = None if deadline is None else deadline - clock()
        if remaining is not None and remaining <= 0:
            return
        wait = interval if remaining is None else min(interval, remaining)
        if stop.wait(wait):
            return
