"""A driver that pushes to a collector tenant and is scraped too fires its alerts once, as that
tenant's, when its scrape carries the tenant: the chart's PodMonitor takes it from the driver pod's
``sparkwatch.io/tenant`` label (``podMonitor.tenantPodLabel``).

A real Prometheus runs the PodMonitor's relabelings as the Prometheus Operator writes them into
its scrape config, on a target with the meta label Kubernetes discovery gives such a pod, beside a
collector target; the committed alert rule is evaluated over what it scraped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from bench.local import served
from sparkwatch.metrics import catalogue as cat
from sparkwatch.model.tenant import TENANT_LABEL
from tests.support import wait_for
from tests.test_dashboards_support import Prometheus, run_prometheus
from tests.test_helm_support import CHART, ci_values, manifests, one
from tests.test_rules import committed_alert_rules

pytestmark = pytest.mark.prometheus

TENANT = "team-a"
POD_LABEL_META = "__meta_kubernetes_pod_label_sparkwatch_io_tenant"
"""Kubernetes discovery's name for the pod label ``sparkwatch.io/tenant``."""
LAG = cat.QUERY_WATERMARK_LAG.name


def sample(query_id: str, **extra: str) -> str:
    labels = {"app_name": "shop", "app_id": f"app-{query_id}", "query_id": query_id,
              "query_name": "orders", **extra}
    pairs = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{LAG}{{{pairs}}} 7200\n"


def page(*samples: str) -> str:
    return f"# TYPE {LAG} gauge\n" + "".join(samples)


# A driver's own /metrics has no tenant label; the collector labels every series with its tenant.
PAGES = {
    "/labelled/metrics": page(sample("q1")),
    "/unlabelled/metrics": page(sample("q2")),
    "/collector/metrics": page(sample("q1", tenant=TENANT), sample("q2", tenant=TENANT)),
}


class Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = PAGES[self.path].encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def pages() -> Iterator[str]:
    with served(Pages) as url:
        yield url.removeprefix("http://")


def operator_relabelings(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The PodMonitor's relabelings as the Prometheus Operator writes them into Prometheus's
    scrape config (the same rules, snake_case keys)."""
    (endpoint,) = one(manifests(values), "PodMonitor")["spec"]["podMetricsEndpoints"]
    return [{snake_case(k): v for k, v in rule.items()} for rule in endpoint.get("relabelings", [])]


def snake_case(key: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group().lower(), key)


def driver_job(name: str, address: str, values: dict[str, Any]) -> dict[str, Any]:
    """A driver pod labelled ``sparkwatch.io/tenant=team-a``, scraped under ``values``."""
    return {
        "job_name": name,
        "metrics_path": f"/{name}/metrics",
        "static_configs": [{"targets": [address], "labels": {POD_LABEL_META: TENANT}}],
        "relabel_configs": operator_relabelings(values),
    }


@pytest.fixture(scope="module")
def prometheus(pages: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    chart = ci_values(CHART / "ci" / "drivers-values.yaml")
    without = {**chart, "podMonitor": {**chart["podMonitor"], "tenantPodLabel": ""}}
    root: Path = tmp_path_factory.mktemp("driver-tenant")
    server = run_prometheus(root, {"scrape_configs": [
        driver_job("labelled", pages, chart),
        driver_job("unlabelled", pages, without),
        {"job_name": "collector", "metrics_path": "/collector/metrics",
         "static_configs": [{"targets": [pages]}]},
    ]})
    try:
        wait_for(lambda: len(server.query(LAG)) == 4, 60, "Prometheus to scrape all targets")
        yield server
    finally:
        server.stop()


def alert_tenants(prometheus: Prometheus) -> dict[str, list[str]]:
    """Query id -> the tenants of the alerts the committed rule fires for it."""
    (rule,) = [r for r in committed_alert_rules() if r["alert"] == "SparkStreamingWatermarkLagHigh"]
    out: dict[str, list[str]] = {}
    for result in prometheus.query(rule["expr"]):
        labels = result["metric"]
        out.setdefault(labels["query_id"], []).append(labels[TENANT_LABEL])
    return {query: sorted(tenants) for query, tenants in out.items()}


def test_the_podmonitor_gives_a_labelled_driver_pods_series_its_tenant(
    prometheus: Prometheus,
) -> None:
    scraped = {(s["metric"]["job"], s["metric"].get(TENANT_LABEL, ""))
               for s in prometheus.query(LAG)}
    assert scraped == {("labelled", TENANT), ("unlabelled", ""), ("collector", TENANT)}


def test_a_driver_scraped_with_its_tenant_and_pushing_to_it_fires_one_alert(
    prometheus: Prometheus,
) -> None:
    tenants = alert_tenants(prometheus)
    assert tenants["q1"] == [TENANT]
    # Without the tenant label, the driver's series count as the default tenant's: two alerts.
    assert tenants["q2"] == ["default", TENANT]
