"""The thresholds config: ``config.yaml`` (the defaults, and the schema) merged with overrides.

The defaults file is the single source: rules, promtool tests and dashboard threshold lines are
generated from it, and the Helm chart's values take it over. Overrides may only change keys the
defaults have (free maps such as ``extra_labels`` and ``per_query`` excepted), with the same type,
so a typo in a values file fails the build instead of silently keeping a default.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sparkwatch.metrics.profiles import PROFILES, fits

_sre_parser: Any = importlib.import_module("re._parser")
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
_DURATION = re.compile(r"(?=\d)" + DURATION_PATTERN)  # and not empty; used with fullmatch
# Prometheus parses durations into Go's time.Duration: at most 2^63-1 nanoseconds (~292 years).
MAX_DURATION_NS = 2**63 - 1
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# Names starting with __ are Prometheus' own (__name__, and the ones dropped after scraping):
# neither an alert label nor a selector on them makes sense. As a pattern without look-ahead.
_USER_LABEL = r"(?:[a-zA-Z][a-zA-Z0-9_]*|_[a-zA-Z0-9][a-zA-Z0-9_]*|_)"
USER_LABEL_PATTERN = f"^{_USER_LABEL}$"
# Text that ends up in a rule's labels or annotations, which Prometheus expands as Go templates:
# no "{{" or "}}" (single braces may stay) and no control characters. A run of braces without a
# doubled one, then runs of other characters each followed by such a run.
_PLAIN = r"[^{}\x00-\x1f\x7f]"
_BRACES = r"\{?(?:\}\{)*\}?"
_TEMPLATE_SAFE = f"{_BRACES}(?:{_PLAIN}+{_BRACES})*"
TEMPLATE_SAFE_PATTERN = f"^{_TEMPLATE_SAFE}$"
# The runbook link: empty (no link) or an http(s) URL, template-safe.
_RUNBOOK_URL = f"(?:https?://{_TEMPLATE_SAFE})?"
RUNBOOK_URL_PATTERN = f"^{_RUNBOOK_URL}$"
# One label matcher of a PromQL selector: name, operator, then a string in double quotes (Go
# escapes), single quotes or backticks (raw). Go's escapes: octal up to \377, \u and \U not a
# surrogate nor above U+10FFFF, and of the quotes only the one that delimits the string.
_COMMON_ESCAPE = (
    r"\\(?:[abfnrtv\\]|x[0-9a-fA-F]{2}|[0-3][0-7]{2}"
    r"|u(?:[0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})"
    r"|U(?:000[0-9a-fA-F]{5}|0010[0-9a-fA-F]{4}))"
)
_DOUBLE = r'"(?:[^"\\\n]|' + _COMMON_ESCAPE + r'|\\")*"'
_SINGLE = r"'(?:[^'\\\n]|" + _COMMON_ESCAPE + r"|\\')*'"
_MATCHER = re.compile(
    rf"\s*({_USER_LABEL})\s*(=~|!~|!=|=)\s*({_DOUBLE}|{_SINGLE}|`[^`]*`)\s*"
)
# No trailing comma: other matchers follow the selector inside the braces.
_SELECTOR = re.compile(f"{_MATCHER.pattern}(?:,{_MATCHER.pattern})*")
# JSON Schema patterns for the Helm chart's values, so that the chart refuses what the build
# refuses (scripts/sync_chart.py). A regex that does not compile is the one thing it lets by.
SELECTOR_PATTERN = f"^(?:{_SELECTOR.pattern})?$"
ZERO_DURATION_PATTERN = r"^(0+(ms|s|m|h|d|w|y))+$"
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
            "w": 604_800_000, "y": 31_536_000_000}
# Regex syntax Python's re accepts and Go's RE2 (PromQL) refuses: look-around, atomic groups,
# possessive quantifiers, back-references.
_RE_TOKEN = re.compile(r"\\.|\[\^?\]?(?:\\.|[^\]])*\]|\(\?(?:=|!|<=|<!|>)|[*+?}]\+", re.S)


class ConfigError(ValueError):
    """An override that does not fit the defaults' layout or types."""


def duration_seconds(text: str) -> float:
    """Seconds of a Prometheus duration such as ``1h30m``."""
    if not _DURATION.fullmatch(text):
        raise ConfigError(f"not a Prometheus duration: {text!r}")
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if sum(int(n) * _UNIT_MS[u] for n, u in parts) * 1_000_000 > MAX_DURATION_NS:
        raise ConfigError(f"duration out of range (at most about 292y): {text!r}")
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher of the selector, its string unquoted."""

    label: str
    op: str
    value: str

    def matches(self, value: str) -> bool:
        """Whether a series whose label is ``value`` ("" when it has none) is selected."""
        if self.op in ("=", "!="):
            return (value == self.value) == (self.op == "=")
        return bool(re.fullmatch(self.value, value, re.S)) == (self.op == "=~")


_GO_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
               "v": "\v", "\\": "\\", "'": "'", '"': '"'}


def _unquote(text: str) -> str:
    """A PromQL string literal's value (the pattern has checked the escapes)."""
    body = text[1:-1]
    if text[0] == "`":
        return body
    return re.sub(
        r"\\(x..|u....|U........|[0-7]{3}|.)",
        lambda m: _GO_ESCAPES.get(m.group(1))
        or chr(int(m.group(1)[1:], 16) if m.group(1)[0] in "xuU" else int(m.group(1), 8)),
        body,
    )


def selector_matchers(selector: str) -> list[Matcher]:
    """The matchers of a selector that ``check_selector`` accepted."""
    return [
        Matcher(m.group(1), m.group(2), _unquote(m.group(3)))
        for m in _MATCHER.finditer(selector)
    ]


def check_selector(selector: str) -> None:
    """``selector`` must be label matchers that fit inside ``{...}`` before other matchers, that
    PromQL accepts (Go string escapes, RE2 regexes), and that some series can match."""
    if not selector:
        return
    if not _SELECTOR.fullmatch(selector):
        raise ConfigError(
            f'selector: not PromQL label matchers (e.g. job="spark-drivers", namespace="etl"; '
            f"no __ label names): {selector!r}"
        )
    matchers = selector_matchers(selector)
    for m in matchers:
        if m.op in ("=~", "!~"):
            problem = _regex_problem(m.value)
            if problem:
                raise ConfigError(f"selector: {m.label}{m.op}{m.value!r}: {problem}")
    for label in {m.label for m in matchers}:
        if _fitting_value(matchers, label, "") is None:
            raise ConfigError(f"selector: no value of label {label} matches all of {selector!r}")


def _regex_problem(value: str) -> str | None:
    """Why PromQL would refuse the regex ``value`` (Python's re stands in for Go's RE2)."""
    for token in _RE_TOKEN.findall(value):
        if re.fullmatch(r"\\[1-9]|\(\?.*|.\+", token, re.S):
            return f"{token!r} is not RE2 syntax (no back-references, look-around, possessive)"
    try:
        re.compile(value)
    except re.error as exc:
        return f"not a valid regular expression ({exc})"
    return None


def _regex_sample(value: str) -> str | None:
    """A short string the regex ``value`` may match (checked by the caller), or None."""
    try:
        parsed = _sre_parser.parse(value)
    except Exception:  # noqa: BLE001 - any parse problem: no sample
        return None
    c = _sre_parser  # re._parser's constants

    def one(items: Any) -> str | None:
        out = []
        for op, av in items:
            if op is c.LITERAL:
                out.append(chr(av))
            elif op in (c.NOT_LITERAL, c.ANY):
                out.append("b" if av == ord("a") else "a")
            elif op is c.IN:
                firsts = [chr(a if o is c.LITERAL else a[0]) for o, a in av
                          if o in (c.LITERAL, c.RANGE)]
                out.append(firsts[0] if firsts and av[0][0] is not c.NEGATE else "a")
            elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
                sub = one(av[2])
                if sub is None:
                    return None
                out.append(sub * av[0])
            elif op is c.SUBPATTERN:
                sub = one(av[-1])
                if sub is None:
                    return None
                out.append(sub)
            elif op is c.BRANCH:
                subs = [one(b) for b in av[1]]
                found = [x for x in subs if x is not None]
                if not found:
                    return None
                out.append(found[0])
            elif op is c.AT:
                continue
            else:
                return None
        return "".join(out)

    return one(parsed)


def _fitting_value(matchers: Iterable[Matcher], label: str, current: str) -> str | None:
    """A value of ``label`` ("" for none) that all of the selector's ``matchers`` on it accept:
    ``current`` if it does, else the first that fits of the values the matchers name, samples
    of their regexes and a few plain ones; None if none does."""
    mine = [m for m in matchers if m.label == label]
    candidates = [current]
    for m in mine:
        candidates.append(m.value)
        if m.op in ("=~", "!~"):
            candidates.append(_regex_sample(m.value) or "")
    candidates += ["", "sparkwatch", "spark-driver", "x", "0"]
    for value in candidates:
        if all(m.matches(value) for m in mine):
            return value
    return None


def fit_labels(selector: str, labels: Mapping[str, str]) -> dict[str, str]:
    """``labels`` changed as little as needed for a series with them to match ``selector``: the
    labels of generated test series. An empty value drops the label."""
    matchers = selector_matchers(selector)
    out = dict(labels)
    for label in dict.fromkeys(m.label for m in matchers):
        value = _fitting_value(matchers, label, out.get(label, ""))
        if value is None:  # check_selector refused such a selector
            raise ConfigError(f"selector: no value of label {label} matches {selector!r}")
        if value:
            out[label] = value
        else:
            out.pop(label, None)
    return out


def check_template_safe(dotted: str, value: Any, *, empty: bool = False) -> str:
    """``value`` a string Prometheus can use as a label value or in an annotation as it is:
    no ``{{``/``}}`` (template actions) and no control characters; not empty unless ``empty``."""
    if not isinstance(value, str):
        raise ConfigError(f"{dotted} must be a string, got {_shown(value)}")
    if not value and not empty:
        raise ConfigError(f"{dotted} must not be empty")
    if "{{" in value or "}}" in value:
        raise ConfigError(
            f"{dotted} must not contain {{{{ or }}}} (Go template), got {_shown(value)}"
        )
    if re.search(r"[\x00-\x1f\x7f]", value):
        raise ConfigError(f"{dotted} must not contain control characters, got {_shown(value)}")
    return value


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


class _StrictLoader(yaml.SafeLoader):
    """YAML without anchors or aliases (an alias bomb takes minutes and gigabytes to expand) and
    without a key given twice in one mapping (silently the last one otherwise)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            what = "alias" if isinstance(event, yaml.AliasEvent) else "anchor"
            raise yaml.MarkedYAMLError(
                problem=f"YAML {what}s (&name, *name) are not allowed here",
                problem_mark=event.start_mark,
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: construct_mapping says so
                break
            if duplicate:
                raise yaml.MarkedYAMLError(
                    problem=f"duplicate key {key!r} (first at line {seen[key].line + 1})",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def safe_yaml(text: str) -> Any:
    """``text`` as YAML read by ``_StrictLoader`` (yaml.safe_load's reading, made stricter); its
    errors go on as PyYAML raises them, for the caller to name the source, line and column."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def read_yaml(path: Path) -> dict[str, Any]:
    data = safe_yaml(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def parse_set(assignment: str) -> dict[str, Any]:
    """``a.b.c=value`` as ``{"a": {"b": {"c": value}}}``; the value is read as YAML (numbers)."""
    path, sep, raw = assignment.partition("=")
    if not sep or not path:
        raise ConfigError(f"expected KEY.PATH=VALUE, got {assignment!r}")
    value: Any = safe_yaml(raw) if raw else ""
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
    labels = {}
    for name, value in data["extra_labels"].items():
        if not isinstance(name, str) or not LABEL_NAME.fullmatch(name):
            raise ConfigError(
                f"extra_labels.{name}: not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
        if name.startswith("__"):
            raise ConfigError(f"extra_labels.{name}: names starting with __ are Prometheus' own")
        labels[name] = check_template_safe(f"extra_labels.{name}", value)
    profile = str(data["metrics_profile"])
    if profile not in PROFILES:
        raise ConfigError(f"metrics_profile must be one of {', '.join(PROFILES)}")
    selector = str(data["selector"])
    check_selector(selector)
    runbook_url = check_template_safe("runbook_url", data["runbook_url"], empty=True)
    if not re.fullmatch(_RUNBOOK_URL, runbook_url):
        raise ConfigError(
            f"runbook_url must be empty or an http(s):// URL, got {_shown(runbook_url)}"
        )
    return Config(selector, runbook_url, labels, alerts, profile)


def _alert(key: str, body: dict[str, Any]) -> AlertConfig:
    if body["severity"] not in SEVERITIES:
        raise ConfigError(f"alerts.{key}.severity must be one of {', '.join(SEVERITIES)}")
    for name in sorted(DURATION_KEYS & body.keys()):
        _check_duration(f"alerts.{key}.{name}", str(body[name]), MIN_SECONDS.get(name, 0.0))
    for name in sorted(NUMBER_KEYS.keys() & body.keys()):
        check_number(f"alerts.{key}.{name}", body[name], NUMBER_KEYS[name])
    for query, seconds in body.get("per_query", {}).items():
        if not isinstance(query, str):
            raise ConfigError(
                f"alerts.{key}.per_query: query names must be strings, got {_shown(query)}"
            )
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
    if value is None:
        return "null"
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
