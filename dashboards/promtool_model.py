"""The shape of promtool unit tests, and how one behaviour case becomes a promtool test group.

Input series are sampled every minute (``interval: 1m``), rules are evaluated every minute, so an
alert whose condition first holds at minute ``t`` fires at minute ``t + for`` (``for`` rounded up
to whole minutes). A firing case checks the boundary: nothing the minute before, then the alert.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sparkwatch.dashboards.alerts import Alert
from sparkwatch.dashboards.config import Config, fit_labels
from sparkwatch.dashboards.promql import name
from sparkwatch.metrics.catalogue import MetricDef
from sparkwatch.model.tenant import DEFAULT_TENANT, TENANT_LABEL

Labels = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Series:
    metric: MetricDef | str
    labels: Labels
    values: str
    suffix: str = ""

    def to_yaml(self) -> dict[str, str]:
        pairs = ", ".join(f"{k}={quoted(v)}" for k, v in self.labels.items())
        return {"series": f"{name(self.metric, self.suffix)}{{{pairs}}}", "values": self.values}


def quoted(value: str) -> str:
    """``value`` as a PromQL string: JSON's escapes are a subset of Go's."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Case:
    """One behaviour of one alert (``alert`` is its config key)."""

    alert: str
    name: str
    series: tuple[Series, ...]
    true_from: int | None = None
    """Minute the condition first holds; None for a case that must never fire."""
    silent_at: tuple[int, ...] = ()
    """Further minutes at which nothing may fire."""
    labels: Labels | None = None
    """Labels of the firing alert (default: those of the first series)."""


SCRAPE_TARGETS: tuple[Labels, ...] = (
    {"job": "spark-driver", "instance": "driver-0:9750"},
    {"job": "sparkwatch-collector", "instance": "collector-0:9751", TENANT_LABEL: DEFAULT_TENANT},
)
"""Where one app's series can be scraped from at once: its driver's endpoint and the collector
(which labels them with the tenant the driver pushes as)."""


def scraped_twice(case: Case) -> Case:
    """``case`` with every series scraped from both targets: the alert must still fire once."""
    first = case.labels if case.labels is not None else case.series[0].labels
    series = tuple(replace(s, labels={**s.labels, **target})
                   for s in case.series for target in SCRAPE_TARGETS)
    return replace(case, name=f"{case.name}, scraped from the driver and the collector",
                   series=series, labels=first)


# The rules select series with the config's ``selector``: every generated input series (and
# the labels expected of what fires) is given labels the selector matches. Equality matchers set
# their value (job="" drops the label); for !=, =~ and !~ a series keeps its value if it matches,
# else gets one computed to match (a value the matchers name, a sample of the regex, or a plain
# one, checked against every matcher). config.check_selector refuses selectors no value of a
# label satisfies, so every case stays valid and no generated test fails for the selector's sake.
# The twice-scraped case keeps its two targets apart by `instance` when the selector fixes `job`,
# and is left out when the selector fixes both (scraped_twice_possible).


def fit_selector(case: Case, selector: str) -> Case:
    """``case`` with every series (and the expected labels) matching ``selector``."""
    if not selector:
        return case
    series = tuple(replace(s, labels=fit_labels(selector, s.labels)) for s in case.series)
    labels = None if case.labels is None else fit_labels(selector, case.labels)
    return replace(case, series=series, labels=labels)


def scraped_twice_possible(selector: str) -> bool:
    """Whether two scrape targets can both match ``selector`` and stay apart (by labels other
    than the tenant, which the rules fill in for the driver): not when it fixes `job` and
    `instance` both. The twice-scraped cases are left out then, as they cannot happen."""
    apart = [
        {k: v for k, v in fit_labels(selector, t).items() if k != TENANT_LABEL}
        for t in SCRAPE_TARGETS
    ]
    return apart[0] != apart[1]


def fit_expr_selector(case: ExprCase, selector: str) -> ExprCase:
    """``case`` with every input series matching ``selector``. Expected samples keep only the
    labels they had: the recording rules aggregate the selector's labels away, but a label the
    selector changed is changed there too."""
    if not selector:
        return case
    series = tuple(replace(s, labels=fit_labels(selector, s.labels)) for s in case.series)
    expected = tuple(
        ({k: v for k, v in fit_labels(selector, labels).items() if k in labels}, value)
        for labels, value in case.expected
    )
    return replace(case, series=series, expected=expected)


def case_tenant(case: Case) -> str:
    first = case.labels if case.labels is not None else case.series[0].labels
    return first.get(TENANT_LABEL, DEFAULT_TENANT)


def minutes(seconds: float) -> int:
    """``seconds`` in the cases' one-minute steps, rounded up.

    Rules are evaluated once a minute: a ``for`` of 90 s is first met at the second evaluation
    after the condition holds, a silence limit of 90 s is first passed two minutes after the last
    event, a window of 90 s looks back over the samples of the last minute and a half.
    """
    return math.ceil(seconds / 60)


def first_minute_above(seconds: float) -> int:
    """The first minute at which ``minute * 60 > seconds``: when a silence since minute 0
    passes a limit of ``seconds``."""
    return math.floor(seconds / 60) + 1


def to_test_group(case: Case, alert: Alert, config: Config) -> dict[str, Any]:
    checks = [_check(alert.name, t, []) for t in case.silent_at]
    if case.true_from is not None:
        fires = case.true_from + minutes(alert.config.seconds("for"))
        expected = _expected(case, alert, config)
        if fires > 0:
            checks.append(_check(alert.name, fires - 1, []))
        checks.append(_check(alert.name, fires, [expected]))
    return {
        "name": f"{alert.name}: {case.name}",
        "interval": "1m",
        "input_series": [s.to_yaml() for s in case.series],
        "alert_rule_test": sorted(checks, key=lambda c: _minute(c["eval_time"])),
    }


def _check(alertname: str, minute: int, expected: list[dict[str, Any]]) -> dict[str, Any]:
    return {"eval_time": f"{minute}m", "alertname": alertname, "exp_alerts": expected}


def _minute(eval_time: str) -> int:
    return int(eval_time.removesuffix("m"))


def _expected(case: Case, alert: Alert, config: Config) -> dict[str, Any]:
    labels = dict(case.labels if case.labels is not None else case.series[0].labels)
    if alert.per:  # the rule keeps these labels only, and the tenant
        labels = {k: v for k, v in labels.items() if k in alert.per}
        labels[TENANT_LABEL] = case_tenant(case)
    rule = alert.rule(config)
    return {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": {k: render(v, labels) for k, v in rule["annotations"].items()},
    }


_LABEL_REF = re.compile(r"\{\{\s*\$labels\.(\w+)\s*\}\}")


def render(template: str, labels: Labels) -> str:
    """What Prometheus makes of an annotation that only uses ``{{ $labels.x }}``."""
    if "{{" in _LABEL_REF.sub("", template):
        raise ValueError(f"annotation uses more than $labels: {template!r}")
    return _LABEL_REF.sub(lambda m: labels.get(m.group(1), ""), template)


@dataclass(frozen=True, slots=True)
class ExprCase:
    """A recording rule's value at a minute, for promql_expr_test."""

    name: str
    series: tuple[Series, ...]
    expr: str
    minute: int
    expected: tuple[tuple[Labels, float], ...] = field(default=())
