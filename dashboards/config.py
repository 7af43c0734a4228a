"""The thresholds config: ``config.yaml`` (the defaults, and the schema) merged with overrides.

The defaults file is the single source: rules, promtool tests and dashboard threshold lines are
generated from it, and the Helm chart's values take it over. Overrides may only change keys the
defaults have (free maps such as ``extra_labels`` and ``per_query`` excepted), with the same type,
so a typo in a values file fails the build instead of silently keeping a default.
"""

from __future__ import annotations

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
# Numbers a rule multiplies or divides by: 0 would make the rule meaningless.
POSITIVE_NUMBER_KEYS = frozenset({"max_silence_trigger_intervals"})

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
    if isinstance(default, bool) or isinstance(value, bool):
        if type(value) is not type(default):
            raise ConfigError(f"{where}: {dotted} must be true or false")
        return value
    if isinstance(default, int | float):
        if not isinstance(value, int | float):
            raise ConfigError(f"{where}: {dotted} must be a number")
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
    for name in sorted(POSITIVE_NUMBER_KEYS & body.keys()):
        if not body[name] > 0:
            raise ConfigError(f"alerts.{key}.{name} must be above 0")
    for query, seconds in body.get("per_query", {}).items():
        if not isinstance(seconds, int | float) or isinstance(seconds, bool):
            raise ConfigError(f"alerts.{key}.per_query.{query} must be a number of seconds")
    params = {k: v for k, v in body.items() if k not in ("enabled", "severity", "for", "window")}
    return AlertConfig(
        key, bool(body["enabled"]), body["severity"], body["for"], body.get("window"), params
    )


def _check_duration(dotted: str, text: str, least: float) -> None:
    try:
        seconds = duration_seconds(text)
    except ConfigError as exc:
        raise ConfigError(f"{dotted}: {exc}") from None
    if seconds < least:
        at_least = "longer than 0" if least < 1 else f"at least {least:g}s"
        raise ConfigError(f"{dotted} must be {at_least}, got {text!r}")
