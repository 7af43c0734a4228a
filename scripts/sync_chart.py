#!/usr/bin/env python3
"""Derive the Helm chart's generated parts from their one source; ``--check`` reports drift.

What it writes under ``helm/sparkwatch/``:

- ``files/grafana/*.json``: the generated dashboards (``sparkwatch dashboards build``), but for
  :data:`NOT_SHIPPED`, with :data:`SELECTOR_SLOT` where ``rules.selector`` goes; rendered with
  the default values, byte for byte what was generated.
- ``files/prometheus/sparkwatch-{alerts,recording-rules}.yaml``: the generated rule files, byte for
  byte (``sparkwatch rules build``), for Prometheus setups without the operator.
- ``files/prometheus/rules.tmpl.yaml``: the same rules with every value that comes from
  ``dashboards/config.yaml`` replaced by a placeholder ``@@key.path[|filter]@@``. The PrometheusRule
  template fills the placeholders from ``.Values.rules`` (see ``_rules.tpl``). The placeholders are
  found by building the rules with a unique *sentinel* value per config key through the real rule
  builder, so no threshold is ever copied by hand; the build is then checked to reproduce the
  generated files exactly from the defaults.
- the ``rules:`` block of ``values.yaml``: ``dashboards/config.yaml`` verbatim (comments included),
  indented, between the ``BEGIN/END generated rules`` markers.
- ``properties.rules`` of ``values.schema.json``: types, duration pattern and severity enum of every
  config key, unknown keys refused (as ``load_config`` does).
- the values table of ``README.md``, from the ``# --`` comments of ``values.yaml``.

Usage: ``python scripts/sync_chart.py`` (write) or ``python scripts/sync_chart.py --check`` (CI).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from sparkwatch.dashboards import rulefiles, yamlout
from sparkwatch.dashboards.alerts import factory_groups
from sparkwatch.dashboards.alerts_latency import percent
from sparkwatch.dashboards.config import (
    DEFAULTS_PATH,
    DURATION_KEYS,
    DURATION_PATTERN,
    FREE_MAPS,
    MIN_SECONDS,
    NUMBER_KEYS,
    RUNBOOK_URL_PATTERN,
    SELECTOR_PATTERN,
    SEVERITIES,
    TEMPLATE_SAFE_PATTERN,
    USER_LABEL_PATTERN,
    ZERO_DURATION_PATTERN,
    AlertConfig,
    Config,
    NumberRange,
    duration_seconds,
    read_yaml,
    to_config,
)
from sparkwatch.dashboards.scope import scoped
from sparkwatch.dashboards.skeleton import to_text

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "sparkwatch"
GENERATED = ROOT / "dashboards" / "generated"
TEMPLATE_FILE = "files/prometheus/rules.tmpl.yaml"
BEGIN = "# BEGIN generated rules (scripts/sync_chart.py from dashboards/config.yaml; do not edit)"
END = "  # END generated rules"
TABLE_BEGIN = "<!-- values-table:start -->"
TABLE_END = "<!-- values-table:end -->"
PLACEHOLDER = re.compile(r"@@([^@|]+)(?:\|([a-z]+))?@@")


# --- the rules template ---------------------------------------------------------------------


class _Sentinels:
    """Unique values per config key, and the text forms they take in the built rules."""

    def __init__(self) -> None:
        self.forms: dict[str, str] = {}  # text in the built rules -> placeholder
        self._n = 0

    def _next(self) -> int:
        self._n += 1
        return self._n

    def number(self, path: str, default: float) -> float:
        # 8-digit integers (or .25 fractions for float keys) never occur in the rules otherwise.
        value: float = 73100000 + 137 * self._next()
        if isinstance(default, float):
            value += 0.25
        self.forms[str(value)] = f"@@{path}@@"
        self.forms[f"{value / 2**30:g}"] = f"@@{path}|gib@@"
        self.forms[percent(value)] = f"@@{path}|percent@@"
        return value

    def duration(self, path: str) -> str:
        value = f"{8100 + self._next()}h"
        self.forms[value] = f"@@{path}@@"
        self.forms[str(int(duration_seconds(value)))] = f"@@{path}|seconds@@"
        return value

    def string(self, path: str) -> str:
        value = f"SWSENTINEL{self._next():03d}X"
        self.forms[value] = f"@@{path}@@"
        return value


def sentinel_config() -> tuple[Config, _Sentinels]:
    defaults = to_config(read_yaml(DEFAULTS_PATH))
    s = _Sentinels()
    alerts = {}
    for key, alert in defaults.alerts.items():
        base = f"alerts.{key}"
        params: dict[str, Any] = {}
        for name, value in alert.params.items():
            if name in FREE_MAPS:
                params[name] = {}  # structural: per_query is not overridable from values
            elif name in DURATION_KEYS:
                params[name] = s.duration(f"{base}.{name}")
            elif isinstance(value, bool) or not isinstance(value, int | float):
                params[name] = s.string(f"{base}.{name}")
            else:
                params[name] = s.number(f"{base}.{name}", value)
        alerts[key] = AlertConfig(
            key,
            True,
            s.string(f"{base}.severity"),
            s.duration(f"{base}.for"),
            s.duration(f"{base}.window") if alert.window is not None else None,
            params,
        )
    selector = s.string("selector")
    # The selector sits inside braces, alone or first among matchers (promql.sel): an empty one
    # leaves no braces and no comma, so it gets two structural placeholders.
    s.forms["{" + selector + "}"] = "@@selector|braces@@"
    s.forms[selector + ", "] = "@@selector|comma@@"
    del s.forms[selector]
    config = replace(
        defaults,
        selector=selector,
        runbook_url=s.string("runbook_url"),
        extra_labels={},
        alerts=alerts,
    )
    return config, s


def _substitute(text: str, forms: dict[str, str]) -> str:
    for sentinel in sorted(forms, key=len, reverse=True):
        text = text.replace(sentinel, forms[sentinel])
    if "SWSENTINEL" in text:
        raise SystemExit(f"sync_chart: a sentinel was not turned into a placeholder: {text!r}")
    return text


def _deep(value: Any, fn: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep(v, fn) for v in value]
    return fn(value) if isinstance(value, str) else value


def rules_template() -> dict[str, Any]:
    """Alert groups (each rule with its config ``key``) and recording groups, placeholders in."""
    config, s = sentinel_config()
    keys = {}
    for factories in factory_groups().values():
        for key, make in factories.items():
            keys[make(config.alert(key), config.selector).name] = key
    alerting = rulefiles.alerting_rules(config)
    recording = rulefiles.recording_rules(config)
    sub = lambda v: _deep(v, lambda t: _substitute(t, s.forms))  # noqa: E731
    return {
        "recording": sub(recording["groups"]),
        "alerting": [
            {
                "name": g["name"],
                "rules": [{"key": keys[r["alert"]], "rule": sub(r)} for r in g["rules"]],
            }
            for g in alerting["groups"]
        ],
    }


def fill(template: dict[str, Any], values: dict[str, Any]) -> dict[str, list[Any]]:
    """The Python twin of the chart's ``sparkwatch.rules.groups`` (used for the self-check)."""

    def one(text: str) -> str:
        def value(match: re.Match[str]) -> str:
            v: Any = values
            for part in match.group(1).split("."):
                v = v[part]
            return _format(v, match.group(2) or "")

        return PLACEHOLDER.sub(value, text)

    alerting = []
    for group in template["alerting"]:
        rules = []
        for entry in group["rules"]:
            if not values["alerts"][entry["key"]]["enabled"]:
                continue
            rule = _deep(entry["rule"], one)
            rule["labels"] = {
                **rule["labels"],
                **{str(k): str(v) for k, v in values["extra_labels"].items()},
            }
            rules.append(rule)
        if rules:
            alerting.append({"name": group["name"], "rules": rules})
    return {"recording": _deep(template["recording"], one), "alerting": alerting}


def _format(v: Any, filt: str) -> str:
    if filt == "braces":
        return "{" + v + "}" if v else ""
    if filt == "comma":
        return v + ", " if v else ""
    if filt == "gib":
        return f"{v / 2**30:g}"
    if filt == "percent":
        return percent(v)
    if filt == "seconds":
        return str(int(duration_seconds(v)))
    return str(v)


def template_text() -> str:
    header = (
        "Generated by scripts/sync_chart.py from dashboards/config.yaml through the rule\n"
        "builder. @@key.path|filter@@ is filled from .Values.rules by templates/_rules.tpl."
    )
    return yamlout.dump(rules_template(), header)


def self_check(text: str) -> None:
    """The template, filled with the defaults, must give exactly the generated rule files."""
    defaults = read_yaml(DEFAULTS_PATH)
    filled = fill(yaml.safe_load(text), defaults)
    config = to_config(defaults)
    want = {
        "recording": rulefiles.recording_rules(config)["groups"],
        "alerting": rulefiles.alerting_rules(config)["groups"],
    }
    if filled != want:
        raise SystemExit("sync_chart: the rules template does not reproduce the generated rules")


# --- values.yaml, values.schema.json, README -------------------------------------------------


def values_text(current: str) -> str:
    config = DEFAULTS_PATH.read_text(encoding="utf-8")
    block = "".join(("  " + line).rstrip() + "\n" for line in config.splitlines())
    start, end = current.index(BEGIN), current.index(END)
    return current[: start + len(BEGIN)] + "\n" + block + current[end:]


def _leaf_schema(name: str, value: Any) -> dict[str, Any]:
    if name in DURATION_KEYS:
        schema: dict[str, Any] = {
            "type": "string",
            "minLength": 1,
            "pattern": DURATION_PATTERN,
            "description": "a Prometheus duration such as 30s, 15m, 1h30m (units from the "
            "largest down)",
        }
        if MIN_SECONDS.get(name, 0.0) > 0:
            schema["not"] = {"pattern": ZERO_DURATION_PATTERN}
            schema["description"] += ", longer than 0"
        return schema
    if name == "severity":
        return {"type": "string", "enum": list(SEVERITIES)}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int | float):
        return _number_schema(NUMBER_KEYS[name])
    return {"type": "string"}


def _number_schema(limits: NumberRange) -> dict[str, Any]:
    """What the build accepts of a number (dashboards/config.py NUMBER_KEYS), as JSON Schema:
    values Helm takes are the values the rules are built from."""
    schema: dict[str, Any] = {"type": "integer" if limits.whole else "number"}
    least = int(limits.least) if limits.least == int(limits.least) else limits.least
    schema["exclusiveMinimum" if limits.above else "minimum"] = least
    if limits.most is not None:
        schema["maximum"] = limits.most
    return schema


def rules_schema() -> dict[str, Any]:
    defaults = read_yaml(DEFAULTS_PATH)
    alerts = {}
    for key, body in defaults["alerts"].items():
        props: dict[str, Any] = {}
        for name, value in body.items():
            if name == "per_query":
                props[name] = {
                    "type": "object",
                    "maxProperties": 0,
                    "description": "per-query trigger intervals change the rule's structure and "
                    "cannot be set from values: build the rules with `sparkwatch rules build "
                    "--set` and load them with prometheusRule.enabled=false",
                }
            else:
                props[name] = _leaf_schema(name, value)
        alerts[key] = {"type": "object", "additionalProperties": False, "properties": props}
    return {
        "type": "object",
        "description": "thresholds of the alerts, same layout as dashboards/config.yaml",
        "additionalProperties": False,
        "properties": {
            "metrics_profile": {
                "type": "string",
                "enum": ["default"],
                "description": "the chart's rules and dashboards are built for the default "
                "metric profile; for full, build them with `sparkwatch rules build --set "
                "metrics_profile=full` and load them with prometheusRule.enabled=false",
            },
            "selector": {
                "type": "string",
                "pattern": SELECTOR_PATTERN,
                "description": 'PromQL label matchers, e.g. job="spark-drivers", namespace="etl"',
            },
            "runbook_url": {
                "type": "string",
                "pattern": RUNBOOK_URL_PATTERN,
                "description": 'an http(s) URL, or "" for none; no "{{", "}}" or control '
                "characters",
            },
            "extra_labels": {
                "type": "object",
                "propertyNames": {"pattern": USER_LABEL_PATTERN},
                "additionalProperties": {
                    "type": "string",
                    "minLength": 1,
                    "pattern": TEMPLATE_SAFE_PATTERN,
                    "description": 'a label value: not empty, no "{{", "}}" or control '
                    "characters",
                },
            },
            "alerts": {"type": "object", "additionalProperties": False, "properties": alerts},
        },
    }


def schema_text(current: str) -> str:
    schema = json.loads(current)
    schema["properties"]["rules"] = rules_schema()
    return json.dumps(schema, indent=2) + "\n"


def values_rows(text: str) -> list[tuple[str, str, str, str]]:
    """(key, type, default, description) of every key preceded by a ``# --`` comment."""
    data = yaml.safe_load(text)
    rows: list[tuple[str, str, str, str]] = []
    stack: list[tuple[int, str]] = []
    pending: str | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = stripped[4:].strip()
            continue
        if pending is not None and stripped.startswith("#") and stripped != "#":
            pending += " " + stripped.lstrip("#").strip()
            continue
        match = re.match(r"^( *)([A-Za-z0-9_.\-\"]+):( |$)", line)
        if not match:
            if stripped and not stripped.startswith("#"):
                pending = None
            continue
        indent, key = len(match.group(1)), match.group(2).strip('"')
        stack = [(i, k) for i, k in stack if i < indent] + [(indent, key)]
        if pending is not None:
            path = [k for _, k in stack]
            value: Any = data
            for part in path:
                value = value[part]
            kind = (
                "list"
                if isinstance(value, list)
                else "object"
                if isinstance(value, dict)
                else "bool"
                if isinstance(value, bool)
                else "int"
                if isinstance(value, int)
                else "float"
                if isinstance(value, float)
                else "string"
            )
            rows.append((".".join(path), kind, json.dumps(value, separators=(",", ":")), pending))
            pending = None
    return rows


def readme_text(current: str, values: str) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    lines = ["| key | type | default | description |", "|---|---|---|---|"]
    for key, kind, default, desc in values_rows(values):
        shown = default if len(default) <= 60 else "see values.yaml"
        lines.append(f"| `{key}` | {kind} | `{cell(shown)}` | {cell(desc)} |")
    start, end = current.index(TABLE_BEGIN), current.index(TABLE_END)
    return current[: start + len(TABLE_BEGIN)] + "\n" + "\n".join(lines) + "\n" + current[end:]


# --- driver ----------------------------------------------------------------------------------


# Generated dashboards the chart leaves out. History (SQLite) reads the history file through a
# Grafana plugin that opens it on Grafana's own host; Grafana in the cluster cannot open the
# SQLite file inside the collector's volume, so it is for a local Grafana beside a driver's
# sparkwatch.db (README). The chart ships History for PostgreSQL.
NOT_SHIPPED = frozenset({"sparkwatch-history-sqlite.json"})


SELECTOR_SLOT = "@@selector@@"
"""Where the shipped dashboards take ``rules.selector``: first in every raw series' braces
(``dashboards/scope.py``); templates/configmap-dashboards.yaml fills it in, or takes it out with
its comma (``{@@selector@@, `` and ``{@@selector@@}``) when the selector is empty."""


def shipped_dashboard(generated: str) -> str:
    """A generated dashboard with :data:`SELECTOR_SLOT` where a selector goes; taken out, the
    generated text again, byte for byte (checked)."""
    text = to_text(scoped(json.loads(generated), SELECTOR_SLOT))
    unslotted = text.replace("{" + SELECTOR_SLOT + ", ", "{").replace("{" + SELECTOR_SLOT + "}", "")
    if unslotted != generated:
        raise SystemExit("the dashboards' selector slot does not come out as built: "
                         "a raw series with empty braces? (dashboards/scope.py)")
    return text


def wanted() -> dict[Path, str]:
    out: dict[Path, str] = {}
    for path in sorted((GENERATED / "grafana").glob("*.json")):
        if path.name in NOT_SHIPPED:
            continue
        out[CHART / "files" / "grafana" / path.name] = shipped_dashboard(
            path.read_text(encoding="utf-8"))
    for path in sorted((GENERATED / "prometheus").glob("*.yaml")):
        out[CHART / "files" / "prometheus" / path.name] = path.read_text(encoding="utf-8")
    text = template_text()
    self_check(text)
    out[CHART / TEMPLATE_FILE] = text
    values = values_text((CHART / "values.yaml").read_text(encoding="utf-8"))
    out[CHART / "values.yaml"] = values
    schema_path = CHART / "values.schema.json"
    out[schema_path] = schema_text(schema_path.read_text(encoding="utf-8"))
    out[CHART / "README.md"] = readme_text(
        (CHART / "README.md").read_text(encoding="utf-8"), values
    )
    return out


def leftovers(files: dict[Path, str]) -> list[Path]:
    out = []
    for directory in (CHART / "files" / "grafana", CHART / "files" / "prometheus"):
        for path in sorted(directory.glob("*")):
            if path not in files:
                out.append(path)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 on drift")
    args = parser.parse_args(argv)
    files = wanted()
    stale = [
        p for p, text in files.items() if not p.exists() or p.read_text(encoding="utf-8") != text
    ]
    extra = leftovers(files)
    if args.check:
        for path in stale + extra:
            print(f"out of date: {path.relative_to(ROOT)}", file=sys.stderr)
        if stale or extra:
            print("run: python scripts/sync_chart.py", file=sys.stderr)
            return 1
        return 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    for path in extra:
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
