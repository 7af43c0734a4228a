"""The Helm chart: renders (real Helm engine) for the defaults and every ci/ file, lints strictly,
validates against the Kubernetes API schemas, ships the generated dashboards exactly, keeps secrets
out of ConfigMaps, orders the migration hook before the Deployment, and its schema refuses bad
values with a message naming the key."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys

import helm_python
import kubernetes_validate
import pytest
import yaml

from sparkwatch.collector.config import SETTINGS
from sparkwatch.dashboards.build import dashboards
from sparkwatch.dashboards.config import load_config
from sparkwatch.model.tenant import TENANT_LABEL
from tests.test_helm_support import (
    CHART,
    CI_FILES,
    CRD_KINDS,
    KUBE_VERSIONS,
    NAMESPACE,
    ROOT,
    by_kind,
    ci_values,
    manifests,
    one,
    render,
    validate_custom_resource,
    validate_schema,
)

# scripts/sync_chart.py NOT_SHIPPED: History (SQLite) needs the history file on Grafana's host.
NOT_SHIPPED = {"sparkwatch-history-sqlite.json"}
CASES = [pytest.param({}, id="defaults")] + [
    pytest.param(ci_values(p), id=p.stem) for p in CI_FILES
]


def test_ci_files_exist_per_combination() -> None:
    assert {p.stem for p in CI_FILES} >= {
        "default-values",
        "monitoring-values",
        "postgresql-values",
        "production-values",
        "rules-overrides-values",
        "persistent-spool-values",
        "drivers-values",
    }


@pytest.mark.parametrize("values", CASES)
def test_renders_and_validates_against_kubernetes_schemas(values: dict) -> None:
    docs = manifests(values)
    assert by_kind(docs, "Deployment") and by_kind(docs, "Service")
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/name"] == "sparkwatch"
        assert len(doc["metadata"]["name"]) <= 63
        if doc["kind"] in CRD_KINDS:
            assert doc["apiVersion"] == "monitoring.coreos.com/v1"
            validate_custom_resource(doc)
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("values", CASES)
def test_lints_strictly_without_errors(values: dict) -> None:
    for version in KUBE_VERSIONS:
        report = helm_python.lint(str(CHART), values, strict=True, kube_version=f"v{version}")
        problems = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]
        assert problems == [], problems


def test_collector_pod_is_locked_down() -> None:
    deployment = one(manifests(), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "resources" not in container
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/var/lib/sparkwatch/spool", "/var/lib/sparkwatch/history", "/tmp"} <= mounts
    assert "--tokens-file=/etc/sparkwatch/tokens/tokens" in container["args"]


def test_the_pod_gets_the_configured_grace_after_sigterm() -> None:
    def grace(values: dict) -> int:
        deployment = one(manifests(values), "Deployment")
        return deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]

    assert grace({}) == 30
    assert grace({"terminationGracePeriodSeconds": 120}) == 120


def test_dashboard_configmaps_hold_exactly_the_generated_json() -> None:
    docs = manifests(ci_values(CHART / "ci" / "monitoring-values.yaml"))
    maps = [d for d in by_kind(docs, "ConfigMap") if "grafana_dashboard" in d["metadata"]["labels"]]
    generated = {p.name: p.read_text() for p in (ROOT / "dashboards/generated/grafana").glob("*")
                 if p.name not in NOT_SHIPPED}
    assert "sparkwatch-history.json" in generated
    shipped = {}
    for cm in maps:
        assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert cm["metadata"]["annotations"]["grafana_folder"] == "Spark Streaming"
        shipped.update(cm["data"])
    assert shipped == generated
    assert {k: json.loads(v) for k, v in shipped.items()} == {
        k: json.loads(v) for k, v in generated.items()
    }


@pytest.mark.parametrize("selector", ['job="spark-drivers"',
                                      'job="spark-drivers", namespace=~"etl|ml", env!="<dev>"'])
def test_dashboard_configmaps_take_the_rules_selector_as_the_dashboards_build_does(
    selector: str,
) -> None:
    """rules.selector narrowed the chart's rules only: its dashboards read every scraped job."""
    docs = manifests({"dashboards": {"enabled": True}, "rules": {"selector": selector}})
    shipped = {name: json.loads(text) for cm in by_kind(docs, "ConfigMap")
               if "grafana_dashboard" in cm["metadata"]["labels"]
               for name, text in cm["data"].items()}
    built = dashboards(load_config(overrides={"selector": selector}))
    assert shipped == {name: board for name, board in built.items() if name not in NOT_SHIPPED}
    variables = shipped["sparkwatch-overview.json"]["templating"]["list"]
    tenant = next(v for v in variables if v["name"] == "tenant")
    assert tenant["query"] == f"label_values(spark_streaming_query_info{{{selector}}}, tenant)"


def test_dashboard_label_and_folder_are_configurable() -> None:
    docs = manifests(
        {
            "dashboards": {
                "enabled": True,
                "label": "my_dash",
                "labelValue": "yes",
                "folderAnnotation": "k8s-sidecar-target-directory",
                "folder": "/tmp/dashboards/spark",
            }
        }
    )
    for cm in by_kind(docs, "ConfigMap"):
        assert cm["metadata"]["labels"]["my_dash"] == "yes"
        assert (
            cm["metadata"]["annotations"]["k8s-sidecar-target-directory"] == "/tmp/dashboards/spark"
        )


def _secret_strings(docs: list[dict]) -> set[str]:
    out = set()
    for secret in by_kind(docs, "Secret"):
        for value in secret["data"].values():
            text = base64.b64decode(value).decode()
            out.add(text.strip())
            for line in text.splitlines():
                out.update(part for part in line.split("=", 1)[1:] if part)
    return out


@pytest.mark.parametrize(
    "name", ["monitoring-values", "postgresql-values", "persistent-spool-values", "default-values"]
)
def test_secrets_never_appear_outside_secrets(name: str) -> None:
    docs = manifests(ci_values(CHART / "ci" / f"{name}.yaml"))
    secrets = _secret_strings(docs)
    assert secrets, "expected the chart to create a Secret"
    if name == "postgresql-values":
        assert "pg-password-42" in " ".join(secrets)
        secrets.add("pg-password-42")
    for doc in docs:
        if doc["kind"] == "Secret":
            continue
        text = yaml.safe_dump(doc)
        for secret in secrets:
            assert secret not in text, (
                f"a secret appears in {doc['kind']} {doc['metadata']['name']}"
            )


def test_migration_hook_runs_before_the_deployment() -> None:
    docs = manifests(ci_values(CHART / "ci" / "postgresql-values.yaml"))
    job = one(docs, "Job")
    hooks = job["metadata"]["annotations"]
    assert set(hooks["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    # The URL Secret the Job reads is an earlier hook (lower weight); the Deployment is no hook,
    # so Helm applies it only after every pre-install/pre-upgrade hook succeeded.
    (url_secret,) = [
        s
        for s in by_kind(docs, "Secret")
        if s["metadata"].get("annotations", {}).get("helm.sh/hook")
    ]
    assert int(url_secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(
        hooks["helm.sh/hook-weight"]
    )
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["valueFrom"]["secretKeyRef"]["name"] == url_secret["metadata"]["name"]
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]
    deployment = one(docs, "Deployment")
    assert "helm.sh/hook" not in deployment["metadata"].get("annotations", {})
    collector_env = {
        e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert collector_env["SPARKWATCH_COLLECTOR_HISTORY_MIGRATE"]["value"] == "false"
    # SQLite (single pod): no hook Job, the pod migrates at start.
    sqlite = manifests()
    assert not by_kind(sqlite, "Job")
    env = {
        e["name"]: e
        for e in one(sqlite, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["SPARKWATCH_COLLECTOR_HISTORY_MIGRATE"]["value"] == "true"


def test_servicemonitor_sends_the_read_token() -> None:
    docs = manifests(ci_values(CHART / "ci" / "monitoring-values.yaml"))
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    read_secret = [
        s for s in by_kind(docs, "Secret") if s["metadata"]["name"].endswith("read-token")
    ]
    assert endpoint["authorization"]["credentials"]["name"] == read_secret[0]["metadata"]["name"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"


BAD_VALUES = [
    ({"history": {"type": "mysql"}}, "/history/type", "sqlite"),
    ({"replicaCount": 3}, "/replicaCount", "maximum"),
    ({"history": {"type": "postgresql"}}, "/history/postgresql", "minLength"),
    (
        {"rules": {"alerts": {"watermark_lag": {"for": "soon"}}}},
        "/rules/alerts/watermark_lag/for",
        "pattern",
    ),
    (
        {"rules": {"alerts": {"watermark_lag": {"severity": "page"}}}},
        "/rules/alerts/watermark_lag/severity",
        "critical",
    ),
    (
        {"rules": {"alerts": {"watermark_lagg": {"max_seconds": 1}}}},
        "/rules/alerts",
        "watermark_lagg",
    ),
    (
        {"rules": {"alerts": {"batch_duration": {"per_query": {"q": 5}}}}},
        "/rules/alerts/batch_duration/per_query",
        "maxProperties",
    ),
    ({"collector": {"config": {"tokens": "a=b"}}}, "propertyName", "tokens"),
    ({"auth": {"tokens": [{"app": "x", "token": "short"}]}}, "/auth/tokens/0/token", "minLength"),
    (
        {
            "spool": {"persistence": {"enabled": True}},
            "history": {"type": "postgresql", "postgresql": {"url": "postgresql+psycopg://u@h/d"}},
            "replicaCount": 2,
        },
        "/replicaCount",
        "maximum",
    ),
    ({"serviceMonitor": {"interval": "often"}}, "/serviceMonitor/interval", "pattern"),
    ({"podMonitor": {"port": "sparkwatch-metrics"}}, "/podMonitor/port", "pattern"),
    ({"podMonitor": {"port": 9750}}, "/podMonitor/port", "string"),
    (
        {"podMonitor": {"selector": {"matchLabels": None}}},
        "/podMonitor/selector",
        "anyOf",
    ),
    ({"podMonitor": {"scrapeTimeout": "soon"}}, "/podMonitor/scrapeTimeout", "pattern"),
    ({"podMonitor": {"tenantPodLabel": "team tenant"}}, "/podMonitor/tenantPodLabel", "pattern"),
    # The collector takes bearer tokens of visible ASCII only and refuses to start otherwise.
    (
        {"auth": {"readToken": {"enabled": True, "value": "my read token"}}},
        "/auth/readToken/value",
        "pattern",
    ),
    (
        {"auth": {"scrapeToken": {"enabled": True, "value": "t\u00f6k\u00e9n-0123456789"}}},
        "/auth/scrapeToken/value",
        "pattern",
    ),
    # Pass-through blocks the Kubernetes API would refuse at apply time.
    ({"collector": {"extraEnv": [{"foo": "bar"}]}}, "/collector/extraEnv/0", "name"),
    ({"networkPolicy": {"from": [{"foo": 1}]}}, "/networkPolicy/from/0", "foo"),
    ({"networkPolicy": {"from": [{}]}}, "/networkPolicy/from/0", "minProperties"),
    ({"networkPolicy": {"egress": [{"too": []}]}}, "/networkPolicy/egress/0", "too"),
    ({"securityContext": {"runAsUser": "root"}}, "/securityContext/runAsUser", "integer"),
    ({"podSecurityContext": {"fsGroup": "10001"}}, "/podSecurityContext/fsGroup", "integer"),
    ({"terminationGracePeriodSeconds": -1}, "/terminationGracePeriodSeconds", "minimum"),
    (
        {"podDisruptionBudget": {"maxUnavailable": "abc"}},
        "/podDisruptionBudget/maxUnavailable",
        "pattern",
    ),
]


@pytest.mark.parametrize(
    ("values", "where", "says"), BAD_VALUES, ids=[w + ":" + s for _, w, s in BAD_VALUES]
)
def test_schema_rejects_bad_values_with_a_clear_message(
    values: dict, where: str, says: str
) -> None:
    with pytest.raises(helm_python.HelmValuesError) as caught:
        validate_schema(values)
    assert where in str(caught.value) and says in str(caught.value), str(caught.value)
    # Rendering refuses them too (Helm validates values before templating).
    with pytest.raises(helm_python.HelmError):
        render(values)


def test_schema_accepts_every_ci_file() -> None:
    for path in CI_FILES:
        validate_schema(ci_values(path))


def test_collector_config_names_match_the_collector_settings() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    allowed = set(
        schema["properties"]["collector"]["properties"]["config"]["propertyNames"]["enum"]
    )
    managed = {
        "host",
        "port",
        "spool_dir",
        "history_url",
        "history_migrate",
        "spool_max_bytes",
        "no_auth",
    }
    assert allowed == {s.name for s in SETTINGS if not s.secret} - managed
    docs = manifests(ci_values(CHART / "ci" / "postgresql-values.yaml"))
    env = {
        e["name"]: e.get("value")
        for e in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["SPARKWATCH_COLLECTOR_RETENTION_DAYS"] == "14"
    assert env["SPARKWATCH_COLLECTOR_MAX_APPS"] == "1000"


def test_chart_is_in_sync_with_its_sources() -> None:
    """Generated dashboards/rules copies, the rules template, the values block (config.yaml), the
    schema's rules part and the README values table: `scripts/sync_chart.py --check`."""
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "sync_chart.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr


def test_readme_values_table_covers_every_top_level_key() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    readme = (CHART / "README.md").read_text()
    table = readme.split("<!-- values-table:start -->")[1].split("<!-- values-table:end -->")[0]
    rows = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    for key, value in values.items():
        assert key in rows or any(r.startswith(key + ".") for r in rows), key
        if not isinstance(value, dict):
            assert key in rows, key


def test_values_rules_block_is_dashboards_config_yaml() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["rules"] == yaml.safe_load((ROOT / "dashboards" / "config.yaml").read_text())


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_prometheusrule_groups_pass_promtool(tmp_path) -> None:
    for name in ("monitoring-values", "rules-overrides-values"):
        rule = one(manifests(ci_values(CHART / "ci" / f"{name}.yaml")), "PrometheusRule")
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
        run = subprocess.run(
            ["promtool", "check", "rules", str(path)], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stdout + run.stderr


DRIVERS = CHART / "ci" / "drivers-values.yaml"


@pytest.mark.parametrize("enabled", [False, True], ids=["podmonitor-off", "podmonitor-on"])
def test_podmonitor_toggle_lints_and_validates_offline(enabled: bool) -> None:
    values = ci_values(DRIVERS)
    values["podMonitor"]["enabled"] = enabled
    docs = manifests(values)
    assert len(by_kind(docs, "PodMonitor")) == (1 if enabled else 0)
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            validate_custom_resource(doc)
        else:
            for version in KUBE_VERSIONS:
                kubernetes_validate.validate(doc, version, strict=True)
    for version in KUBE_VERSIONS:
        report = helm_python.lint(str(CHART), values, strict=True, kube_version=f"v{version}")
        assert [m for m in report["messages"] if m["severity"] >= 2] + report["errors"] == []


def test_podmonitor_is_off_by_default() -> None:
    assert by_kind(manifests(), "PodMonitor") == []


def test_podmonitor_scrapes_labelled_driver_pods_by_port_name() -> None:
    monitor = one(manifests(ci_values(DRIVERS)), "PodMonitor")
    assert monitor["metadata"]["name"] == "sparkwatch-drivers"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    spec = monitor["spec"]
    assert spec["selector"] == {
        "matchLabels": {"spark-role": "driver", "sparkwatch.io/scrape": "true"}
    }
    assert spec["namespaceSelector"] == {"matchNames": ["spark-jobs", "spark-streaming"]}
    assert spec["podTargetLabels"] == ["spark-app-selector"]
    assert spec["podMetricsEndpoints"] == [
        {"port": "sparkwatch", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s",
         "relabelings": [TENANT_RELABELING]}
    ]


TENANT_RELABELING = {
    "sourceLabels": ["__meta_kubernetes_pod_label_sparkwatch_io_tenant"], "regex": "(.+)",
    "targetLabel": TENANT_LABEL, "replacement": "${1}", "action": "replace",
}
"""The pod label sparkwatch.io/tenant, when set, as the series' tenant
(tests/test_driver_tenant_scrape.py runs it in a real Prometheus)."""


def test_the_tenant_relabeling_comes_first_and_an_empty_pod_label_turns_it_off() -> None:
    own = [{"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "pod"}]
    both = {"podMonitor": {"enabled": True, "relabelings": own}}
    (endpoint,) = one(manifests(both), "PodMonitor")["spec"]["podMetricsEndpoints"]
    assert endpoint["relabelings"] == [TENANT_RELABELING, *own]
    off = {"podMonitor": {"enabled": True, "tenantPodLabel": ""}}
    (endpoint,) = one(manifests(off), "PodMonitor")["spec"]["podMetricsEndpoints"]
    assert "relabelings" not in endpoint
    other = {"podMonitor": {"enabled": True, "tenantPodLabel": "example.com/team-name"}}
    (endpoint,) = one(manifests(other), "PodMonitor")["spec"]["podMetricsEndpoints"]
    assert endpoint["relabelings"][0]["sourceLabels"] == [
        "__meta_kubernetes_pod_label_example_com_team_name"]


def test_podmonitor_defaults_to_the_release_namespace_or_any() -> None:
    own = one(manifests({"podMonitor": {"enabled": True}}), "PodMonitor")["spec"]
    assert own["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    assert own["selector"] == {"matchLabels": {"spark-role": "driver"}}
    every = {"podMonitor": {"enabled": True, "namespaces": {"any": True}}}
    assert one(manifests(every), "PodMonitor")["spec"]["namespaceSelector"] == {"any": True}


def test_a_misspelt_podmonitor_field_fails_offline_validation() -> None:
    monitor = one(manifests(ci_values(DRIVERS)), "PodMonitor")
    monitor["spec"]["podMetricEndpoints"] = monitor["spec"].pop("podMetricsEndpoints")
    with pytest.raises(AssertionError, match="does not know"):
        validate_custom_resource(monitor)


def test_the_documented_driver_pod_template_matches_the_podmonitor_defaults() -> None:
    """docs/run.md's driver pod template declares the port the PodMonitor scrapes, on the port the
    listener serves by default, with the label ci/drivers-values.yaml selects."""
    from sparkwatch.settings import DEFAULT_METRICS_PORT

    text = (ROOT / "docs" / "run.md").read_text()
    template = yaml.safe_load(text.split("<!-- driver-pod-template -->")[1].split("```yaml")[1]
                              .split("```")[0])
    (container,) = template["spec"]["containers"]
    (port,) = container["ports"]
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["podMonitor"]
    assert port == {"name": defaults["port"], "containerPort": DEFAULT_METRICS_PORT,
                    "protocol": "TCP"}
    selected = ci_values(DRIVERS)["podMonitor"]["selector"]["matchLabels"]
    assert template["metadata"]["labels"].items() <= selected.items()


def test_tokens_of_tenants_and_tenant_read_and_scrape_tokens_reach_the_collector() -> None:
    import base64

    docs = manifests({"auth": {
        "tokens": [{"app": "orders", "token": "t" * 16, "tenant": "team-a"},
                   {"app": "*", "token": "u" * 16}],
        "tenantReadTokens": {"tokens": [{"tenant": "team-a", "token": "r" * 16}]},
        "scrapeToken": {"enabled": True, "value": "s" * 16},
    }, "serviceMonitor": {"enabled": True}})
    secrets = {s["metadata"]["name"].rsplit("-", 1)[-1] if not s["metadata"]["name"].endswith(
        "read-tokens") else "tenant-read-tokens": s for s in by_kind(docs, "Secret")}
    tokens = base64.b64decode(secrets["tokens"]["data"]["tokens"]).decode()
    assert tokens == f"team-a/orders={'t' * 16}\n*={'u' * 16}\n"
    read = secrets["tenant-read-tokens"]["data"]["tenant-read-tokens"]
    assert base64.b64decode(read).decode() == f"team-a={'r' * 16}"
    env = {e["name"]: e for e in
           one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SPARKWATCH_COLLECTOR_TENANT_READ_TOKENS"]["valueFrom"]["secretKeyRef"]["key"] \
        == "tenant-read-tokens"
    scrape_ref = env["SPARKWATCH_COLLECTOR_SCRAPE_TOKEN"]["valueFrom"]["secretKeyRef"]
    (endpoint,) = one(docs, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["authorization"]["credentials"] == scrape_ref  # the scrape token, not reads


def test_a_tenant_name_with_a_slash_is_refused_by_the_schema() -> None:
    import pytest as _pytest

    with _pytest.raises(Exception, match="tenant"):
        validate_schema({"auth": {"tokens": [{"app": "x", "token": "t" * 16,
                                              "tenant": "a/b"}]}})
