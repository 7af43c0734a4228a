"""Alert rules: what an alert is, and the list of them, built from the thresholds config.

Each alert keeps, besides its expression, the ``signals`` it compares: the same expressions
without the thresholds. A healthy system fires no alert, so the end-to-end test checks the
signals return data on real scrapes (the names, labels and joins are right), and separately makes
one alert (unbounded state) actually true.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkwatch.dashboards.config import AlertConfig, Config
from sparkwatch.model.tenant import DEFAULT_TENANT, TENANT_LABEL


@dataclass(frozen=True, slots=True)
class Alert:
    name: str
    config: AlertConfig
    expr: str
    summary: str
    description: str
    signals: tuple[str, ...] = field(default=())
    per: tuple[str, ...] = ()
    """The labels one alert stands for (the catalogue's, and the tenant): a query scraped from
    two endpoints (its driver's and the collector's) fires one alert, not one per scrape target.
    Empty: one per series (the collector's own alerts, where each replica is its own target)."""

    @property
    def promql(self) -> str:
        """The rule's expression: ``expr``, one series per ``per`` labels and tenant. A driver's
        own /metrics has no tenant label: its series count as the default tenant's, the one a
        collector files them under when the driver pushes without a tenant token."""
        if not self.per:
            return self.expr
        fill = f'"{TENANT_LABEL}", "{DEFAULT_TENANT}", "{TENANT_LABEL}", ""'
        labels = ", ".join((*self.per, TENANT_LABEL))
        return f"max by ({labels}) (label_replace(\n{self.expr},\n{fill}))"

    @property
    def anchor(self) -> str:
        """The runbook section (docs/runbooks.md has a ``## <name>`` heading per alert)."""
        return self.name.lower()

    def rule(self, config: Config) -> dict[str, Any]:
        """The Prometheus rule, as it appears in the YAML file."""
        labels = {"severity": self.config.severity, **config.extra_labels}
        return {
            "alert": self.name,
            "expr": self.promql,
            "for": self.config.for_,
            "labels": labels,
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": f"{config.runbook_url}#{self.anchor}",
            },
        }


AlertFactory = Callable[[AlertConfig, str], Alert]
"""Builds one alert from its config section and the global selector."""

# Template fragments naming what fired, for annotations.
QUERY = "query {{ $labels.query_name }} ({{ $labels.query_id }}) of app {{ $labels.app_name }}"
OPERATOR = "operator {{ $labels.operator }} #{{ $labels.operator_index }} of " + QUERY
APP = "app {{ $labels.app_name }} ({{ $labels.app_id }})"


def factory_groups() -> dict[str, dict[str, AlertFactory]]:
    """Rule group name -> {config key -> factory}, in the order the rule file lists them."""
    from sparkwatch.dashboards import alerts_health, alerts_latency, alerts_state

    return {
        "sparkwatch.state": alerts_state.FACTORIES,
        "sparkwatch.event-time": alerts_latency.FACTORIES,
        "sparkwatch.health": alerts_health.FACTORIES,
    }


def alert_groups(config: Config, include_disabled: bool = False) -> dict[str, list[Alert]]:
    groups = factory_groups()
    keys = {key for factories in groups.values() for key in factories}
    if keys != set(config.alerts):
        raise ValueError(
            f"config and alert factories disagree on: {sorted(keys ^ set(config.alerts))}"
        )
    out = {}
    for group, factories in groups.items():
        built = [make(config.alert(key), config.selector) for key, make in factories.items()]
        # An alert reading a family the metric profile does not export would never fire.
        kept = [a for a in built if config.exports(a.expr)]
        out[group] = [a for a in kept if include_disabled or a.config.enabled]
    return out


def build_alerts(config: Config, include_disabled: bool = False) -> list[Alert]:
    return [a for alerts in alert_groups(config, include_disabled).values() for a in alerts]
