"""Shared helpers of the Helm chart tests: render with the real Helm engine (helm-python-sdk)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "helm" / "sparkwatch"
CI_FILES = sorted((CHART / "ci").glob("*.yaml"))
RELEASE, NAMESPACE = "sparkwatch", "observability"
# The oldest and newest Kubernetes the chart claims (Chart.yaml kubeVersion >=1.25) and for which
# kubernetes-validate ships schemas.
KUBE_VERSIONS = ("1.25.0", "1.37.0")
# Custom resources of the Prometheus Operator: kubernetes-validate ships only the built-in API
# schemas, so these are checked against the operator's own API types (validate_custom_resource).
CRD_KINDS = frozenset({"ServiceMonitor", "PodMonitor", "PrometheusRule"})


def ci_values(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


@functools.cache
def _chart() -> Any:
    import helm_python

    return helm_python.Chart.load(str(CHART))


def render(values: dict[str, Any] | None = None) -> dict[str, str]:
    """Template path -> rendered text, as `helm template` would produce."""
    return _chart().render(values or {}, name=RELEASE, namespace=NAMESPACE)


def validate_schema(values: dict[str, Any]) -> None:
    _chart().validate_schema(values)


def manifests(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = []
    for path, text in sorted(render(values).items()):
        if path.endswith(".txt"):
            continue
        out.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return out


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(docs, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def validate_custom_resource(doc: dict[str, Any]) -> None:
    """Offline validation of a Prometheus Operator resource against the operator's API types
    (cloudcoil's models, generated from its CRDs): types and patterns are checked on the way in;
    the models ignore unknown fields, so a misspelt field shows as a difference on the way out."""
    from cloudcoil.models.prometheus_operator import v1

    model = getattr(v1, doc["kind"]).model_validate(doc)
    back = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert back == doc, f"{doc['kind']} has fields the Prometheus Operator does not know"
