"""Hostile values: strings that would inject YAML into a manifest (a privileged pod from a priority
class name), names, labels and annotations Kubernetes refuses, image references, resource
quantities and rule values holding placeholders. The schema refuses each naming the value, the
templates quote every string they interpolate (so even without the schema an injected line stays
inside one string), and the rule placeholders are filled in one pass, as the rule builder does."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from sparkwatch.dashboards import rulefiles
from sparkwatch.dashboards.config import load_config
from tests.test_helm_support import (
    CHART,
    CRD_KINDS,
    KUBE_VERSIONS,
    NAMESPACE,
    RELEASE,
    by_kind,
    manifests,
    one,
    render,
    validate_custom_resource,
)

PG_URL = "postgresql+psycopg://u:pw@db:5432/sw"
DIGEST = "sha256:" + "0123456789abcdef" * 4


def _nested(path: str, value: Any) -> dict[str, Any]:
    """{"a": {"b": value}} of "a.b"."""
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    return out


def _merge(*parts: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = _merge(out[key], value)
            else:
                out[key] = value
    return out


def _refused(values: dict[str, Any]) -> str:
    with pytest.raises(helm_python.HelmValuesError) as caught:
        render(values)
    return str(caught.value)


# What each string value needs to be rendered at all (the key of a Secret the chart creates, a
# claim the chart mounts), keyed by its values path.
CONTEXT: dict[str, dict[str, Any]] = {
    "priorityClassName": {},
    "serviceAccount.name": {},
    "history.sqlite.storageClass": {},
    "history.sqlite.existingClaim": {},
    "spool.persistence.storageClass": {"spool": {"persistence": {"enabled": True}}},
    "spool.persistence.existingClaim": {"spool": {"persistence": {"enabled": True}}},
    "auth.existingSecretKey": {},
    "auth.readToken.existingSecretKey": {"auth": {"readToken": {"enabled": True}},
                                         "serviceMonitor": {"enabled": True}},
    "auth.scrapeToken.existingSecretKey": {"auth": {"scrapeToken": {"enabled": True}},
                                           "serviceMonitor": {"enabled": True}},
    "auth.tenantReadTokens.existingSecretKey": {
        "auth": {"readToken": {"enabled": True}, "tenantReadTokens": {
            "tokens": [{"tenant": "etl", "token": "tenant-read-token-0123456789"}]}}},
    "history.postgresql.existingSecretKey": {
        "history": {"type": "postgresql", "postgresql": {"url": PG_URL}}},
}
INJECTIONS = {
    "priorityClassName": "high\n      hostNetwork: true",
    "serviceAccount.name": "x\n      hostPID: true",
    "history.sqlite.storageClass": "fast\n  volumeMode: Block",
    "history.sqlite.existingClaim": "c\n            readOnly: true",
    "spool.persistence.storageClass": "fast\n  volumeMode: Block",
    "spool.persistence.existingClaim": "c\n            readOnly: true",
    "auth.existingSecretKey": "tokens\n      hostNetwork: true",
    "auth.readToken.existingSecretKey": "token\n  evil: ZXZpbA==",
    "auth.scrapeToken.existingSecretKey": "token: x",
    "auth.tenantReadTokens.existingSecretKey": "#x",
    "history.postgresql.existingSecretKey": "url\n  evil: ZXZpbA==",
}
SECRET_KEYS = [k for k in CONTEXT if k.endswith("existingSecretKey")]


def _injection(path: str, value: str) -> dict[str, Any]:
    return _merge(CONTEXT[path], _nested(path, value))


@pytest.mark.parametrize("path", sorted(INJECTIONS))
def test_strings_that_would_inject_yaml_are_refused_naming_the_value(path: str) -> None:
    message = _refused(_injection(path, INJECTIONS[path]))
    assert "/" + path.replace(".", "/") in message, message


@pytest.mark.parametrize("path", SECRET_KEYS)
@pytest.mark.parametrize("key", ["url: x", "#x", "a b", "a/b", "k" * 254, ""])
def test_secret_keys_outside_the_kubernetes_key_charset_are_refused(path: str, key: str) -> None:
    message = _refused(_injection(path, key))
    assert "/" + path.replace(".", "/") in message, message


def _schemaless_chart(tmp_path: Path) -> Any:
    """The chart without its values schema: what `helm template --skip-schema-validation` (or a
    parent chart's values) would feed the templates."""
    copy = tmp_path / "sparkwatch"
    shutil.copytree(CHART, copy)
    (copy / "values.schema.json").unlink()
    return helm_python.Chart.load(str(copy))


def _walk(node: Any) -> Any:
    """Every node of a document, mapping keys included."""
    yield node
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_injected_lines_stay_inside_one_string_even_without_the_schema(tmp_path: Path) -> None:
    chart = _schemaless_chart(tmp_path)
    for path, value in INJECTIONS.items():
        out = chart.render(_injection(path, value), name=RELEASE, namespace=NAMESPACE)
        docs = [d for p, text in out.items() if not p.endswith(".txt")
                for d in yaml.safe_load_all(text) if d]
        nodes = [n for d in docs for n in _walk(d)]
        for node in nodes:
            if isinstance(node, dict):
                assert not {"hostNetwork", "hostPID", "evil", "volumeMode"} & node.keys(), (
                    path, node)
                assert not {"claimName", "readOnly"} <= node.keys(), (path, node)
        # The whole value arrives as one string where the chart puts it.
        assert value in nodes, (path, value)
        for secret in by_kind(docs, "Secret"):
            assert len(secret["data"]) == 1, (path, secret["data"])


def test_a_priority_class_name_carrying_host_network_renders_no_privileged_pod(
    tmp_path: Path,
) -> None:
    chart = _schemaless_chart(tmp_path)
    out = chart.render({"priorityClassName": INJECTIONS["priorityClassName"],
                        "serviceAccount": {"name": INJECTIONS["serviceAccount.name"]}},
                       name=RELEASE, namespace=NAMESPACE)
    pod = yaml.safe_load(out["sparkwatch/templates/deployment.yaml"])["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod and "hostPID" not in pod
    assert pod["priorityClassName"] == INJECTIONS["priorityClassName"]
    assert pod["serviceAccountName"] == INJECTIONS["serviceAccount.name"]


BAD_NAMES = [
    pytest.param({"fullnameOverride": "My_Name"}, "/fullnameOverride", id="fullname-upper"),
    pytest.param({"fullnameOverride": "-abc-"}, "/fullnameOverride", id="fullname-dashes"),
    pytest.param({"fullnameOverride": "a.b"}, "/fullnameOverride", id="fullname-dots"),
    pytest.param({"fullnameOverride": "a" * 64}, "/fullnameOverride", id="fullname-too-long"),
    pytest.param({"nameOverride": "1abc"}, "/nameOverride", id="name-digit-first"),
    pytest.param({"commonLabels": {"bad key!": "x"}}, "bad key!", id="common-label-key"),
    pytest.param({"commonLabels": {"team": "x y z"}}, "/commonLabels/team",
                 id="common-label-value"),
    pytest.param({"commonLabels": {"team": "a" * 75}}, "/commonLabels/team",
                 id="common-label-value-too-long"),
    pytest.param({"podLabels": {"x": "-bad-"}}, "/podLabels/x", id="pod-label-value"),
    pytest.param({"podLabels": {"Foo/bar/baz": "ok"}}, "Foo/bar/baz", id="pod-label-key"),
    pytest.param({"serviceMonitor": {"enabled": True, "labels": {"bad key": "v"}}}, "bad key",
                 id="servicemonitor-label-key"),
    pytest.param({"serviceMonitor": {"enabled": True, "labels": {"k": "v v"}}},
                 "/serviceMonitor/labels/k", id="servicemonitor-label-value"),
    pytest.param({"prometheusRule": {"enabled": True, "labels": {"x": "bad value!"}}},
                 "/prometheusRule/labels/x", id="prometheusrule-label-value"),
    pytest.param({"podMonitor": {"labels": {"x": "a\nb"}}}, "/podMonitor/labels/x",
                 id="podmonitor-label-value"),
    pytest.param({"dashboards": {"enabled": True, "label": "bad label key!"}},
                 "/dashboards/label", id="dashboard-label-key"),
    pytest.param({"dashboards": {"enabled": True, "labelValue": "x y"}},
                 "/dashboards/labelValue", id="dashboard-label-value"),
    pytest.param({"dashboards": {"enabled": True, "folderAnnotation": "a b"}},
                 "/dashboards/folderAnnotation", id="dashboard-folder-annotation"),
    pytest.param({"dashboards": {"enabled": True, "namespace": "Bad_NS"}},
                 "/dashboards/namespace", id="dashboard-namespace"),
    pytest.param({"podAnnotations": {"a b": "x"}}, "a b", id="pod-annotation-key"),
    pytest.param({"service": {"annotations": {"a:b": "x"}}}, "a:b",
                 id="service-annotation-key"),
    pytest.param({"serviceAccount": {"annotations": {"x\ny": "x"}}}, "x\\ny",
                 id="serviceaccount-annotation-key"),
    pytest.param({"ingress": {"annotations": {"-a": "x"}}}, "-a", id="ingress-annotation-key"),
    pytest.param({"auth": {"existingSecret": "Tokens_Secret"}}, "/auth/existingSecret",
                 id="existing-secret-name"),
    pytest.param({"imagePullSecrets": [{"name": "a b"}]}, "/imagePullSecrets/0/name",
                 id="pull-secret-name"),
]


@pytest.mark.parametrize(("values", "named"), BAD_NAMES)
def test_names_labels_and_annotations_kubernetes_refuses_are_refused_naming_the_value(
    values: dict[str, Any], named: str
) -> None:
    message = _refused(values)
    assert named in message, message


def _validate(docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            validate_custom_resource(doc)
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_valid_names_labels_and_annotations_still_render_and_validate() -> None:
    values = {
        "fullnameOverride": "sw-collector",
        "commonLabels": {"example.com/team": "data-eng", "tier": "", "v": "1.2_3"},
        "podLabels": {"sidecar.istio.io/inject": "false"},
        "podAnnotations": {"prometheus.io/scrape": "true", "note": "any text: at all\n"},
        "priorityClassName": "system-cluster-critical",
        "serviceAccount": {"name": "sparkwatch.collector"},
        "history": {"sqlite": {"storageClass": "fast-ssd", "existingClaim": "history.v2"}},
        "auth": {"existingSecretKey": "ingest.tokens_v-2"},
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "dashboards": {"enabled": True, "namespace": "grafana", "label": "grafana_dashboard",
                       "labelValue": "1", "folderAnnotation": "grafana.io/folder",
                       "folder": "Spark: \"streaming\""},
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                      "limits": {"cpu": 1, "memory": "1Gi", "ephemeral-storage": "2Gi"}},
    }
    docs = manifests(values)
    _validate(docs)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["serviceAccountName"] == "sparkwatch.collector"
    assert all(c["metadata"]["namespace"] == "grafana" for c in by_kind(docs, "ConfigMap"))
    folder = by_kind(docs, "ConfigMap")[0]["metadata"]["annotations"]["grafana.io/folder"]
    assert folder == 'Spark: "streaming"'


def test_an_image_digest_renders_repository_at_digest_and_ignores_the_tag() -> None:
    docs = manifests({"image": {"tag": "1.2.3", "digest": DIGEST},
                      "history": {"type": "postgresql", "postgresql": {"url": PG_URL}}})
    _validate(docs)
    images = {c["image"] for kind in ("Deployment", "Job")
              for c in one(docs, kind)["spec"]["template"]["spec"]["containers"]}
    assert images == {f"ghcr.io/sparkwatch/sparkwatch@{DIGEST}"}


def test_without_a_digest_the_image_is_repository_colon_tag() -> None:
    pod = one(manifests({"image": {"tag": "1.2.3"}}), "Deployment")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "ghcr.io/sparkwatch/sparkwatch:1.2.3"


@pytest.mark.parametrize(
    ("image", "named"),
    [
        pytest.param({"tag": DIGEST}, "/image/tag", id="digest-in-the-tag"),
        pytest.param({"tag": f"1.2.3@{DIGEST}"}, "/image/tag", id="tag-at-digest"),
        pytest.param({"tag": "has space\nx"}, "/image/tag", id="tag-with-space"),
        pytest.param({"tag": "-1"}, "/image/tag", id="tag-starting-with-dash"),
        pytest.param({"digest": "sha256:abc"}, "/image/digest", id="short-digest"),
        pytest.param({"digest": "1.2.3"}, "/image/digest", id="tag-in-the-digest"),
        pytest.param({"repository": "Bad Repo"}, "/image/repository", id="bad-repository"),
        pytest.param({"repository": "repo:1.0"}, "/image/repository", id="tag-in-repository"),
    ],
)
def test_bad_image_references_are_refused_naming_the_value(
    image: dict[str, Any], named: str
) -> None:
    message = _refused({"image": image})
    assert named in message, message


@pytest.mark.parametrize(
    ("resources", "named"),
    [
        pytest.param({"limits": {"cpu": "lots"}}, "/resources/limits/cpu", id="word"),
        pytest.param({"requests": {"cpu": -1}}, "/resources/requests/cpu", id="negative"),
        pytest.param({"requests": {"memory": "1 Gi"}}, "/resources/requests/memory",
                     id="space"),
        pytest.param({"limts": {"cpu": 1}}, "limts", id="misspelt-section"),
    ],
)
@pytest.mark.parametrize("where", ["resources", "migrations.resources"])
def test_resource_quantities_kubernetes_refuses_are_refused(
    resources: dict[str, Any], named: str, where: str
) -> None:
    message = _refused(_nested(where, resources))
    prefix = "/migrations" if where.startswith("migrations") else ""
    assert (prefix + named if named.startswith("/") else named) in message, message


def test_an_extra_env_with_both_value_and_value_from_is_refused() -> None:
    entry = {"name": "X", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    message = _refused({"collector": {"extraEnv": [entry]}})
    assert "/collector/extraEnv/0" in message, message
    # Either alone still renders.
    for alone in ({"name": "X", "value": "1"},
                  {"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}):
        env = one(manifests({"collector": {"extraEnv": [alone]}}), "Deployment")[
            "spec"]["template"]["spec"]["containers"][0]["env"]
        assert alone in env


def test_a_placeholder_inside_a_rules_value_is_emitted_literally() -> None:
    selector = "job=`@@alerts.state_unbounded.min_rows@@`"
    values = {"prometheusRule": {"enabled": True}, "rules": {"selector": selector}}
    groups = one(manifests(values), "PrometheusRule")["spec"]["groups"]
    exprs = [r["expr"] for g in groups for r in g["rules"]]
    assert any(selector in e for e in exprs)
    assert not any("job=`" in e and "@@" not in e for e in exprs), exprs
    config = load_config(overrides={"selector": selector})
    built = rulefiles.recording_rules(config)["groups"] + rulefiles.alerting_rules(config)["groups"]
    assert groups == built
