"""Parsers of setting values, shared by every table of settings: each takes the text of an
environment variable, a Spark conf value or a flag and raises ValueError saying what it expected."""

from __future__ import annotations

import math
import re
from pathlib import Path

from sparkwatch.summary import quoted

OFF_WORDS = {"", "off", "none", "false", "0", "disabled"}
METRICS_PROFILES = ("default", "full")
"""Names of the metric profiles (sparkwatch/metrics/profiles.py defines what each exports)."""


def boolean(raw: str) -> bool:
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true/false")


def port(raw: str) -> int:
    number = int(raw)
    if not 0 <= number <= 65535:
        raise ValueError("expected a port number 0-65535")
    return number


def listen_host(raw: str) -> str:
    """An address or name to listen on. '' is refused: the server then listens on every
    interface, which an empty variable must not decide."""
    if not raw.strip():
        raise ValueError("empty: give an address (0.0.0.0 for every interface, 127.0.0.1 for "
                         "this machine only) or a host name")
    return raw


def directory(raw: str) -> Path:
    """A directory's path. '' is refused: Path('') is '.', whatever directory the command ran
    in."""
    if not raw:
        raise ValueError("empty: give a directory")
    return Path(raw)


MAX_INT = 2**53
"""The largest whole number :func:`positive_int` takes: every one up to it is exact as a float,
and a count multiplied into seconds (``--stall-intervals`` times a trigger interval) overflowed
the float conversion past 1e308, failing the stall job at every run after a clean start."""


def positive_int(raw: str) -> int:
    value = int(raw)
    if not 0 < value <= MAX_INT:
        raise ValueError(f"expected a positive integer, at most {MAX_INT}")
    return value


MAX_SECONDS = 315_360_000.0
"""Ten years in seconds: the largest value :func:`positive_float` and :func:`non_negative_float`
take. Most of what they parse are durations, which reach ``timedelta`` and the collector's
scheduler: those overflow (a traceback at start-up, or a job failing every run) long before a
float does. (Per-second quotas take :func:`rate` instead.)"""
MAX_DAYS = 3_650.0
"""Ten years in days: the largest value :func:`days` takes (``now - timedelta(days=...)``
overflows past year 1, about 740,000 days back)."""


def _float_in(raw: str, low: float, high: float, expected: str, *, above: bool = False) -> float:
    """``raw`` as a float from ``low`` (or above it) to ``high``, else a ValueError saying what
    was ``expected``. Written so that NaN fails too: every comparison with it is false."""
    value = float(raw)
    if not ((low < value) if above else (low <= value)) or not value <= high:
        raise ValueError(f"expected {expected}")
    return value


def positive_float(raw: str) -> float:
    return _float_in(raw, 0, MAX_SECONDS, f"a positive number, at most {MAX_SECONDS:.0f} "
                     "(ten years in seconds)", above=True)


def non_negative_float(raw: str) -> float:
    return _float_in(raw, 0, MAX_SECONDS, f"a number >= 0, at most {MAX_SECONDS:.0f} "
                     "(ten years in seconds)")


MIN_INTERVAL = 0.1
"""The shortest interval :func:`interval` and :func:`interval_or_off` take: a job or sampler
run every few microseconds kept a core busy (1e-9 s: a whole core in an idle driver)."""


def interval(raw: str) -> float:
    """How often something periodic runs: at least :data:`MIN_INTERVAL` seconds."""
    return _float_in(raw, MIN_INTERVAL, MAX_SECONDS, f"a number of seconds from "
                     f"{MIN_INTERVAL:g} to {MAX_SECONDS:.0f} (ten years)")


def interval_or_off(raw: str) -> float:
    """:func:`interval`, or 0 for off."""
    if float(raw) == 0:
        return 0.0
    return _float_in(raw, MIN_INTERVAL, MAX_SECONDS, f"0 (off) or a number of seconds from "
                     f"{MIN_INTERVAL:g} to {MAX_SECONDS:.0f} (ten years)")


MAX_RATE = 1e15
"""The largest per-second quota :func:`rate` takes: far past any collector, yet finite."""


def rate(raw: str) -> float:
    """A positive amount per second (events, bytes), at most :data:`MAX_RATE`."""
    return _float_in(raw, 0, MAX_RATE, f"a positive number per second, at most {MAX_RATE:.0e}",
                     above=True)


def fraction(raw: str) -> float:
    """A part of a whole: more than 0, at most 1."""
    return _float_in(raw, 0, 1, "a fraction, more than 0 and at most 1", above=True)


def days(raw: str) -> float:
    """A positive number of days, at most :data:`MAX_DAYS`."""
    return _float_in(raw, 0, MAX_DAYS, f"a positive number of days, at most {MAX_DAYS:.0f} "
                     "(ten years)", above=True)


def metrics_profile(raw: str) -> str:
    if raw.strip() not in METRICS_PROFILES:
        raise ValueError(f"expected one of {', '.join(METRICS_PROFILES)}")
    return raw.strip()


def regex_list(raw: str) -> tuple[str, ...] | None:
    """Comma-separated regexes (no regex here needs a comma); empty: none."""
    patterns = tuple(p.strip() for p in raw.split(",") if p.strip())
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from None
        except (RecursionError, OverflowError) as exc:
            # "(" * 100000, a{99999999999}: neither a re.error, so neither named the setting.
            raise ValueError(f"a regex the regex compiler cannot take, {quoted(pattern, 40)} "
                             f"({exc})") from None
    return patterns or None


def buckets(raw: str) -> tuple[float, ...] | None:
    """Comma-separated upper bounds in seconds, increasing (+Inf is always added); empty: the
    catalogue's."""
    try:
        bounds = tuple(float(b) for b in raw.split(",") if b.strip())
    except ValueError:
        raise ValueError("expected increasing numbers of seconds, comma-separated") from None
    if any(not math.isfinite(b) for b in bounds) or list(bounds) != sorted(set(bounds)):
        raise ValueError("expected increasing finite numbers of seconds, comma-separated")
    return bounds or None


def optional_url(raw: str) -> str | None:
    """A URL, or None for 'off' (and the other words of :data:`OFF_WORDS`)."""
    return None if raw.strip().lower() in OFF_WORDS else raw.strip()


def text(raw: str) -> str | None:
    return raw or None


def secret(raw: str) -> str | None:
    """A bearer token (RFC 6750): visible ASCII only. Anything else could never be sent in an
    ``Authorization`` header, and http.client's refusal quotes the whole header, token and all;
    the error here says what is wrong without a character of it (:meth:`Setting.shown`)."""
    token = raw.strip()
    if any(not "\x21" <= char <= "\x7e" for char in token):
        raise ValueError("expected visible ASCII characters only (no spaces, control or "
                         "non-ASCII characters)")
    return token or None
