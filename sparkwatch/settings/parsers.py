"""Parsers of setting values, shared by every table of settings: each takes the text of an
environment variable, a Spark conf value or a flag and raises ValueError saying what it expected."""

from __future__ import annotations

import math
import re

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


def positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("expected a positive integer")
    return value


def positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("expected a positive number")
    return value


def non_negative_float(raw: str) -> float:
    value = float(raw)
    if not value >= 0:
        raise ValueError("expected a number >= 0")
    return value


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
    return raw.strip() or None
