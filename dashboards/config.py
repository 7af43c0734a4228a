"""The thresholds config: ``config.yaml`` (the defaults, and the schema) merged with overrides.

The defaults file is the single source: rules, promtool tests and dashboard threshold lines are
generated from it, and the Helm chart's values take it over. Overrides may only change keys the
defaults have (free maps such as ``extra_labels`` and ``per_query`` excepted), with the same type,
so a typo in a values file fails the build instead of silently keeping a default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sparkwatch.metrics.profiles import PROFILES, fits

DEFAULTS_PATH = Path(__file__).resolve().parent / "config.yaml"
SEVERITIES = ("critical", "warning", "info")
# Maps whose keys the user chooses: anything goes below them.
FREE_MAPS = frozenset({"extra_labels", "per_query"})
DURATION_KEYS = frozenset({"for", "window", "horizon"})
# Least seconds per duration key (`for` may be 0s: fire at once). A zero range is a PromQL parse
# error. A window must also hold two scrapes for rate() to give a value, but the scrape interval
# is Prometheus' setting, not ours (a 30s window is right at a 10s scrape): runbooks say so.
MIN_SECONDS = {"window": 0.001, "horizon": 0.001}


@dataclass(frozen=True, slots=True)
class NumberRange:
    """What a numeric key accepts (always finite): from ``least`` (above it when ``above``) up
    to ``most``, whole numbers only when ``whole``. ``what`` says why, in the error."""

    least: float
    above: bool = False
    most: float | None = None
    whole: bool = False
    what: str = ""

    def problem(self, value: float) -> str | None:
        """Why ``value`` does not fit, or None."""
        if self.whole and value != int(value):
            return "must be a whole number"
        low = value < self.least or (self.above and value == self.least)
        if self.most is not None and (low or value > self.most):
            return f"must be from {self.least:g} to {self.most:g}{self.what}"
        if low:
            return f"must be {'above' if self.above else 'at least'} {self.least:g}{self.what}"
        return None


# Every numeric key of the defaults (tests check that none is missing), by its name under an
# alert; `per_query` values are trigger intervals in seconds (PER_QUERY_SECONDS). 0 is allowed
# where the rule still means something (min_rows 0: any state; max_ratio 0: any late row;
# min_offsets 0: any growing backlog); thresholds in seconds or bytes of 0 or less would fire on
# every sample. The ratios are factors of a rate (min_ratio) or of the real-time interval
# (real_time_max_ratio), below 1 the alert fires on healthy queries; max_ratio is a share.
_SECONDS = NumberRange(0, above=True)
NUMBER_KEYS: Mapping[str, NumberRange] = {
    "min_rows": NumberRange(0, whole=True, what=" rows"),
    "limit_bytes": NumberRange(0, above=True, whole=True, what=" bytes"),
    "max_seconds": _SECONDS,
    "max_silence_seconds": _SECONDS,
    "max_ratio": NumberRange(0, most=1, what=" (a share of the input rows: 0.01 is 1%)"),
    "min_ratio": NumberRange(1, what=" (input rate over processing rate)"),
    "real_time_max_ratio": NumberRange(1, what=" (times the real-time batch duration)"),
    "min_offsets": NumberRange(0, whole=True, what=" offsets"),
    # Multiplies the trigger interval: 0 would make the rule meaningless.
    "max_silence_trigger_intervals": NumberRange(0, above=True),
}
PER_QUERY_SECONDS = _SECONDS
# The chart's values schema (scripts/sync_chart.py) is made from NUMBER_KEYS too.

# Prometheus' own duration syntax: units from the largest down, each at most once. As a JSON
# Schema pattern too (Go's RE2 has no look-ahead: the chart's schema adds minLength 1).
DURATION_PATTERN = r"^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$"
_DURATION = re.compile(r"(?=\d)" + DURATION_PATTERN)  # and not empty
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# One label matcher of a PromQL selector: name, operator, then a string in double quotes (Go
# escapes), single quotes or backticks (raw).
_ESCAPE = r"""\\(?:[abfnrtv\\'"]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3})"""
_MATCHER = re.compile(
    r"\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"
    rf"""(?:"(?:[^"\\\n]|{_ESCAPE})*"|'(?:[^'\\\n]|{_ESCAPE})*'|`[^`]*`)\s*"""
)
# No trailing comma: other matchers follow the selector inside the braces.
_SELECTOR = re.compile(f"{_MATCHER.pattern}(?:,{_MATCHER.pattern})*")
# JSON Schema patterns for the Helm chart's values, so that the chart refuses what the build
# refuses (scripts/sync_chart.py).
SELECTOR_PATTERN = f"^(?:{_SELECTOR.pattern})?$"
ZERO_DURATION_PATTERN = r"^(0+(ms|s|m|h|d|w|y))+$"
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


class ConfigError(ValueError):
    """An override that does not fit the defaults' layout or types."""


def duration_seconds(text: str) -> float:
    """Seconds of a Prometheus duration such as ``1h30m``."""
    if not _DURATION.match(text):
        raise ConfigError(f"not a Prometheus duration: {text!r}")
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text))


def check_selector(selector: str) -> None:
    """``selector`` must be label matchers that fit inside ``{...}`` before other matchers."""
    if selector and not _SELECTOR.fullmatch(selector):
        raise ConfigError(
            f'selector: not PromQL label matchers (e.g. job="spark-drivers", namespace="etl"): '
            f"{selector!r}"
        )


@dataclass(frozen=True, slots=True)
class AlertConfig:
    key: str
    enabled: bool
    severity: str
    for_: str
    window: str | None
    params: Mapping[str, Any]
    """The alert's own keys (thresholds); ``window``/``for`` have attributes."""

    def param(self, name: str) -> Any:
        return self.params[name]

    def seconds(self, name: str) -> float:
        """A duration key (``for``, ``window``, ``horizon``) in seconds."""
        value = {"for": self.for_, "window": self.window}.get(name, self.params.get(name))
        if not isinstance(value, str):
            raise ConfigError(f"alerts.{self.key} has no duration {name!r}")
        return duration_seconds(value)


@dataclass(frozen=True, slots=True)
class Config:
    selector: str
    runbook_url: str
    extra_labels: Mapping[str, str]
    alerts: Mapping[str, AlertConfig]
    metrics_profile: str = "default"

    def alert(self, key: str) -> AlertConfig:
        return self.alerts[key]

    def exports(self, text: str) -> bool:
        """Every metric family ``text`` (PromQL, a recording rule's name) reads is in the
        profile's /metrics."""
        return fits(text, PROFILES[self.metrics_profile])


def load_config(
    files: Iterable[Path] = (), sets: Iterable[str] = (), overrides: Mapping[str, Any] | None = None
) -> Config:
    """Defaults, then each YAML file, then ``key.path=value`` strings, then ``overrides``."""
    merged = read_yaml(DEFAULTS_PATH)
    for path in files:
        merged = merge(merged, read_yaml(path), where=str(path))
    for assignment in sets:
        merged = merge(merged, parse_set(assignment), where=f"--set {assignment}")
    if overrides:
        merged = merge(merged, dict(overrides), where="overrides")
    return to_config(merged)


def read_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def parse_set(assignment: str) -> dict[str, Any]:
    """``a.b.c=value`` as ``{"a": {"b": {"c": value}}}``; the value is read as YAML (numbers)."""
    path, sep, raw = assignment.partition("=")
    if not sep or not path:
        raise ConfigError(f"expected KEY.PATH=VALUE, got {assignment!r}")
    value: Any = yaml.safe_load(raw) if raw else ""
    for part in reversed(path.split(".")):
        value = {part: value}
    return value


def merge(base: dict[str, Any], override: Mapping[str, Any], where: str, path: str = "") -> Any:
    out = dict(base)
    for key, value in override.items():
        dotted = f"{path}.{key}" if path else str(key)
        if key not in base:
            raise ConfigError(f"{where}: unknown key {dotted}")
        out[key] = _merge_value(base[key], value, where, dotted)
    return out


def _merge_value(default: Any, value: Any, where: str, dotted: str) -> Any:
    leaf = dotted.rsplit(".", 1)[-1]
    if isinstance(default, dict):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: {dotted} must be a mapping")
        return {**default, **value} if leaf in FREE_MAPS else merge(default, value, where, dotted)
    # By the default's type: a bool given for a number must say "a number".
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {dotted} must be true or false")
        return value
    if isinstance(default, int | float):
        if not is_number(value):
            raise ConfigError(f"{where}: {dotted} must be a number, got {_shown(value)}")
        return value
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {dotted} must be a string")
    return value


def to_config(data: Mapping[str, Any]) -> Config:
    alerts = {key: _alert(key, dict(body)) for key, body in data["alerts"].items()}
    labels = {str(k): str(v) for k, v in data["extra_labels"].items()}
    for name in labels:
        if not LABEL_NAME.match(name):
            raise ConfigError(
                f"extra_labels.{name}: not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
    profile = str(data["metrics_profile"])
    if profile not in PROFILES:
        raise ConfigError(f"metrics_profile must be one of {', '.join(PROFILES)}")
    selector = str(data["selector"])
    check_selector(selector)
    return Config(selector, str(data["runbook_url"]), labels, alerts, profile)


def _alert(key: str, body: dict[str, Any]) -> AlertConfig:
    if body["severity"] not in SEVERITIES:
        raise ConfigError(f"alerts.{key}.severity must be one of {', '.join(SEVERITIES)}")
    for name in sorted(DURATION_KEYS & body.keys()):
        _check_duration(f"alerts.{key}.{name}", str(body[name]), MIN_SECONDS.get(name, 0.0))
    for name in sorted(NUMBER_KEYS.keys() & body.keys()):
        check_number(f"alerts.{key}.{name}", body[name], NUMBER_KEYS[name])
    for query, seconds in body.get("per_query", {}).items():
        if not is_number(seconds):
            raise ConfigError(
                f"alerts.{key}.per_query.{query} must be a number of seconds, got {_shown(seconds)}"
            )
        check_number(f"alerts.{key}.per_query.{query}", seconds, PER_QUERY_SECONDS)
    params = {k: v for k, v in body.items() if k not in ("enabled", "severity", "for", "window")}
    return AlertConfig(
        key, bool(body["enabled"]), body["severity"], body["for"], body.get("window"), params
    )


def is_number(value: Any) -> bool:
    """An int or float, not a bool (YAML's true is an int to Python)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_number(dotted: str, value: float, limits: NumberRange) -> None:
    """``value`` finite and within ``limits``; a one-line ConfigError naming ``dotted``."""
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float: PromQL would read it as +Inf
        finite = False
    problem = limits.problem(value) if finite else "must be a finite number"
    if problem:
        raise ConfigError(f"{dotted} {problem}, got {_shown(value)}")


def _shown(value: Any) -> str:
    """``value`` as the user wrote it in YAML (.nan, .inf, true), short."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _check_duration(dotted: str, text: str, least: float) -> None:
    try:
        seconds = duration_seconds(text)
    except ConfigError as exc:
        raise ConfigError(f"{dotted}: {exc}") from None
    if seconds < least:
        at_least = "longer than 0" if least < 1 else f"at least {least:g}s"
        raise ConfigError(f"{dotted} must be {at_least}, got {text!r}")
