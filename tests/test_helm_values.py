"""Values the chart renders into a collector that starts, and combinations it refuses before a pod
could crash-loop, block a drain or be evicted: the rendered Deployment is fed to the collector's
real settings loader (its own argument parser, env and tokens file), and every refusal names the
values key to change."""

from __future__ import annotations

import argparse
import base64
import copy
from pathlib import Path
from typing import Any

import helm_python
import pytest
import yaml

from sparkwatch.cli import collector as collector_cli
from sparkwatch.settings.collector import (
    SETTINGS,
    CollectorSettings,
    load_collector_settings,
)
from tests.test_helm_support import (
    CHART,
    CI_FILES,
    by_kind,
    ci_values,
    manifests,
    one,
    render,
    validate_schema,
)

TOKENS = {"tokens": [{"app": "*", "token": "ingest-token-0123456789"}]}
PG = {"type": "postgresql", "postgresql": {"url": "postgresql+psycopg://u:pw@db:5432/sw"}}
# Secrets the production example names but does not create (existingSecret): what an operator
# would have put in them.
EXTERNAL = {
    "sparkwatch-db": {"url": "postgresql+psycopg://u:pw@db:5432/sw"},
    "sparkwatch-ingest-tokens": {"tokens": "*=ingest-token-0123456789\n"},
    "sparkwatch-read-token": {"token": "read-token-0123456789"},
}


# --- the rendered pod, started as far as its settings -------------------------------------------


def _secret_data(docs: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    out = copy.deepcopy(EXTERNAL)
    for secret in by_kind(docs, "Secret"):
        out[secret["metadata"]["name"]] = {
            k: base64.b64decode(v).decode() for k, v in secret["data"].items()
        }
    return out


def collector_settings(docs: list[dict[str, Any]], tmp_path: Path) -> CollectorSettings:
    """The settings the rendered collector container would start with: its env (Secret references
    resolved), its args through `sparkwatch collector`'s own parser, its mounted tokens file."""
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    secrets = _secret_data(docs)
    env = {}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            ref = var["valueFrom"]["secretKeyRef"]
            env[var["name"]] = secrets[ref["name"]][ref["key"]]
    volume = next(v for v in pod["volumes"] if v["name"] == "tokens")["secret"]
    tokens = tmp_path / "tokens"
    tokens.write_text(secrets[volume["secretName"]][volume["items"][0]["key"]])
    argv = [a if not a.startswith("--tokens-file=") else f"--tokens-file={tokens}"
            for a in container["args"]]
    parser = argparse.ArgumentParser()
    collector_cli.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    return load_collector_settings(env, flags, args.tokens_file)


@pytest.mark.parametrize("path", CI_FILES, ids=[p.stem for p in CI_FILES])
def test_every_ci_example_renders_a_collector_whose_settings_load(path: Path,
                                                                  tmp_path: Path) -> None:
    settings = collector_settings(manifests(ci_values(path)), tmp_path)
    assert settings.port == 9751 and settings.tokens


LARGE_CONFIG = {
    "max_body_bytes": 10485760,
    "max_inflight_body_bytes": 41943040,
    "quarantine_max_bytes": 268435456,
    "max_bytes_per_second": 50000000,
    "max_events_per_second": 2000000,
    "max_connections": 1000,
    "retention_days": 14,
    "rate_burst_seconds": 2.5,
    "spool_fsync": False,
}


def test_integral_collector_settings_of_a_million_or_more_render_as_integers(
    tmp_path: Path,
) -> None:
    """Helm reads every number of the values as a float64, which prints as 1.048576e+07 from a
    million up: an integer setting would refuse it and the collector crash-loop."""
    docs = manifests({"collector": {"config": LARGE_CONFIG}, "auth": TOKENS})
    env = {e["name"]: e.get("value") for e in
           one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SPARKWATCH_COLLECTOR_MAX_BODY_BYTES"] == "10485760"
    assert env["SPARKWATCH_COLLECTOR_MAX_BYTES_PER_SECOND"] == "50000000"
    assert env["SPARKWATCH_COLLECTOR_RATE_BURST_SECONDS"] == "2.5"
    assert env["SPARKWATCH_COLLECTOR_SPOOL_FSYNC"] == "false"
    settings = collector_settings(docs, tmp_path)
    assert settings.max_body_bytes == 10485760
    assert settings.max_inflight_body_bytes == 41943040
    assert settings.quarantine_max_bytes == 268435456
    assert settings.max_bytes_per_second == 50000000.0
    assert settings.max_events_per_second == 2000000.0
    assert settings.rate_burst_seconds == 2.5
    assert settings.retention_days == 14.0
    assert settings.spool_fsync is False


def test_tenant_read_tokens_with_a_scrape_token_render_a_collector_that_starts(
    tmp_path: Path,
) -> None:
    docs = manifests({"auth": {
        **TOKENS,
        "tenantReadTokens": {"tokens": [{"tenant": "team-a", "token": "team-a-read-0123456789"}]},
        "scrapeToken": {"enabled": True, "value": "scrape-token-0123456789"},
    }})
    settings = collector_settings(docs, tmp_path)
    assert settings.tenant_read_tokens == (("team-a", "team-a-read-0123456789"),)
    assert settings.scrape_token == "scrape-token-0123456789"


# --- combinations refused before anything is applied -------------------------------------------

REFUSED = [
    pytest.param(
        {"auth": {"tenantReadTokens": {"tokens": [{"tenant": "a", "token": "a" * 16}]}}},
        ["auth.tenantReadTokens", "auth.readToken.enabled", "auth.scrapeToken.enabled"],
        id="tenant-read-tokens-without-read-or-scrape-token",
    ),
    pytest.param(
        {"auth": {"tenantReadTokens": {"existingSecret": "tenant-tokens"}}},
        ["auth.tenantReadTokens", "auth.readToken.enabled", "auth.scrapeToken.enabled"],
        id="tenant-read-tokens-secret-without-read-or-scrape-token",
    ),
    pytest.param(
        {"history": PG, "autoscaling": {"enabled": True}},
        ["autoscaling.enabled", "resources.requests.cpu"],
        id="autoscaling-without-cpu-request",
    ),
    pytest.param(
        {"history": PG, "resources": {"requests": {"cpu": "250m"}},
         "autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}},
        ["autoscaling.minReplicas", "autoscaling.maxReplicas"],
        id="autoscaling-min-above-max",
    ),
    pytest.param(
        {"podDisruptionBudget": {"enabled": True}},
        ["podDisruptionBudget", "replicaCount"],
        id="pdb-on-the-single-sqlite-replica",
    ),
    pytest.param(
        {"history": PG, "replicaCount": 2,
         "podDisruptionBudget": {"enabled": True, "minAvailable": 2}},
        ["podDisruptionBudget.minAvailable", "replicaCount"],
        id="pdb-min-available-every-replica",
    ),
    pytest.param(
        {"history": PG, "replicaCount": 3,
         "podDisruptionBudget": {"enabled": True, "minAvailable": "100%"}},
        ["podDisruptionBudget.minAvailable", "replicaCount"],
        id="pdb-min-available-100-percent",
    ),
    pytest.param(
        {"history": PG, "replicaCount": 2,
         "podDisruptionBudget": {"enabled": True, "maxUnavailable": 0}},
        ["podDisruptionBudget.maxUnavailable"],
        id="pdb-max-unavailable-zero",
    ),
    pytest.param(
        {"history": PG, "resources": {"requests": {"cpu": "250m"}},
         "autoscaling": {"enabled": True, "minReplicas": 1, "maxReplicas": 3},
         "podDisruptionBudget": {"enabled": True}},
        ["podDisruptionBudget.minAvailable", "autoscaling.minReplicas"],
        id="pdb-with-autoscaling-down-to-one",
    ),
    pytest.param(
        {"spool": {"maxBytes": 4 * 2**30, "sizeLimit": "2Gi"}},
        ["spool.maxBytes", "spool.sizeLimit"],
        id="spool-bound-above-the-emptydir-limit",
    ),
    pytest.param(
        # The quarantine file (256 MiB by default) lives in the spool directory too.
        {"spool": {"maxBytes": 2 * 2**30 - 2**20, "sizeLimit": "2Gi"}},
        ["spool.maxBytes", "collector.config.quarantine_max_bytes", "spool.sizeLimit"],
        id="spool-and-quarantine-above-the-emptydir-limit",
    ),
    pytest.param(
        {"spool": {"maxBytes": 2**30, "persistence": {"enabled": True, "size": "1000M"}}},
        ["spool.maxBytes", "spool.persistence.size"],
        id="spool-bound-above-the-claim-size",
    ),
    pytest.param(
        {"collector": {"config": {"max_inflight_body_bytes": 2**20}}},
        ["collector.config.max_inflight_body_bytes", "collector.config.max_body_bytes",
         "(16777216)"],
        id="inflight-bound-below-the-default-body-limit",
    ),
    pytest.param(
        {"collector": {"config": {"max_body_bytes": 2**26, "max_inflight_body_bytes": 2**25}}},
        ["collector.config.max_inflight_body_bytes (33554432)", "(67108864)"],
        id="inflight-bound-below-the-body-limit",
    ),
]


@pytest.mark.parametrize(("values", "names"), REFUSED)
def test_combinations_that_cannot_work_are_refused_naming_the_keys(
    values: dict[str, Any], names: list[str]
) -> None:
    values = {"auth": {**TOKENS, **values.get("auth", {})},
              **{k: v for k, v in values.items() if k != "auth"}}
    with pytest.raises(helm_python.HelmError) as caught:
        render(values)
    for name in names:
        assert name in str(caught.value), str(caught.value)


ACCEPTED = [
    pytest.param({"history": PG, "replicaCount": 2, "podDisruptionBudget": {"enabled": True}},
                 id="pdb-with-two-replicas"),
    pytest.param({"podDisruptionBudget": {"enabled": True, "maxUnavailable": 1}},
                 id="pdb-that-lets-the-single-replica-go"),
    pytest.param({"replicaCount": 0, "podDisruptionBudget": {"enabled": True}},
                 id="pdb-with-no-replica"),
    pytest.param({"history": PG, "resources": {"requests": {"cpu": "250m"}},
                  "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 2}},
                 id="autoscaling-min-equals-max"),
    pytest.param({"spool": {"maxBytes": 1536 * 2**20, "sizeLimit": "1.75Gi"}},
                 id="spool-and-quarantine-fit-a-fractional-limit"),
    pytest.param({"spool": {"maxBytes": 2**30, "sizeLimit": "2G"},
                  "collector": {"config": {"quarantine_max_bytes": 2**20}}},
                 id="spool-fits-a-decimal-limit"),
    pytest.param({"spool": {"maxBytes": 8 * 2**30,
                            "persistence": {"enabled": True, "existingClaim": "big"}}},
                 id="spool-on-a-claim-of-unknown-size"),
    pytest.param({"collector": {"config": {"max_body_bytes": 2**20,
                                           "max_inflight_body_bytes": 2**20}}},
                 id="inflight-bound-equal-to-the-body-limit"),
]


@pytest.mark.parametrize("values", ACCEPTED)
def test_neighbouring_combinations_that_work_still_render(values: dict[str, Any]) -> None:
    assert by_kind(manifests(values), "Deployment")


def test_the_chart_assumes_the_collectors_default_quarantine_and_body_bounds() -> None:
    helpers = (CHART / "templates" / "_helpers.tpl").read_text()
    assert f"$quarantine := {CollectorSettings().quarantine_max_bytes}" in helpers
    assert f"$body := {CollectorSettings().max_body_bytes}" in helpers


# --- secrets: pods follow a rotation ---------------------------------------------------------


def _pod_annotations(values: dict[str, Any]) -> dict[str, str]:
    return dict(one(manifests(values), "Deployment")["spec"]["template"]["metadata"]
                .get("annotations", {}))


BASE: dict[str, Any] = {
    "history": PG,
    "replicaCount": 2,
    "auth": {
        **TOKENS,
        "readToken": {"enabled": True, "value": "read-token-0123456789"},
        "scrapeToken": {"enabled": True, "value": "scrape-token-0123456789"},
        "tenantReadTokens": {"tokens": [{"tenant": "a", "token": "tenant-a-token-0123456789"}]},
    },
}
ROTATIONS = {
    "ingest-tokens": ("auth", "tokens", [{"app": "*", "token": "ingest-token-rotated-01"}]),
    "read-token": ("auth", "readToken", {"enabled": True, "value": "read-token-rotated-01"}),
    "scrape-token": ("auth", "scrapeToken", {"enabled": True, "value": "scrape-token-rotated"}),
    "tenant-read-tokens": ("auth", "tenantReadTokens",
                           {"tokens": [{"tenant": "a", "token": "tenant-a-token-rotated"}]}),
    "history-url": ("history", "postgresql", {"url": "postgresql+psycopg://u:new@db:5432/sw"}),
}


@pytest.mark.parametrize("rotated", list(ROTATIONS))
def test_rotating_any_secret_the_chart_renders_rolls_the_pods(rotated: str) -> None:
    before = _pod_annotations(BASE)
    assert _pod_annotations(BASE) == before  # explicit values: the same render twice
    section, key, value = ROTATIONS[rotated]
    changed = copy.deepcopy(BASE)
    changed[section][key] = value
    assert _pod_annotations(changed) != before


# --- generated tokens and GitOps ---------------------------------------------------------------


def test_generated_tokens_differ_per_render_and_the_readme_says_so() -> None:
    """Without a live Secret for `lookup` to read (helm template, Argo CD, --dry-run), a generated
    token is new on every render: the README says so and points GitOps users to existingSecret."""
    values = {"auth": {"readToken": {"enabled": True}}}
    first, second = (_secret_data(manifests(values)) for _ in range(2))
    assert first["sparkwatch-tokens"] != second["sparkwatch-tokens"]
    assert first["sparkwatch-read-token"] != second["sparkwatch-read-token"]
    readme = (CHART / "README.md").read_text()
    section = readme.split("### Generated tokens and GitOps")[1].split("\n## ")[0]
    for said in ("helm template", "Argo CD", "lookup", "auth.existingSecret",
                 "auth.readToken.existingSecret", "auth.scrapeToken.existingSecret"):
        assert said in section, said
    # The values table (from the values.yaml comments) says it where the tokens are set.
    rows = {line.split("`")[1]: line for line in readme.splitlines() if line.startswith("| `")}
    for key in ("auth.tokens", "auth.readToken.value", "auth.scrapeToken.value"):
        assert "new on every render" in rows[key] and "existingSecret" in rows[key], key


# --- NetworkPolicy of the production example ---------------------------------------------------


def _admits(policy: dict[str, Any], namespace: str, pod_labels: dict[str, str]) -> bool:
    """Whether a pod of that namespace (labelled kubernetes.io/metadata.name as every namespace
    is since 1.22) may reach the collector's port, by the policy's ingress rules."""
    ns_labels = {"kubernetes.io/metadata.name": namespace}

    def matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
        assert not (selector or {}).get("matchExpressions"), "extend the matcher"
        return (selector or {}).get("matchLabels", {}).items() <= labels.items()

    for rule in policy["spec"]["ingress"]:
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            if "namespaceSelector" not in peer and namespace != "observability":
                continue
            if matches(peer.get("namespaceSelector"), ns_labels) and matches(
                peer.get("podSelector"), pod_labels
            ):
                return True
    return False


def test_the_production_example_admits_prometheus_and_the_ingress_controller() -> None:
    values = ci_values(CHART / "ci" / "production-values.yaml")
    assert values["serviceMonitor"]["enabled"] and values["ingress"]["enabled"]
    policy = one(manifests(values), "NetworkPolicy")
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    controller = {"app.kubernetes.io/name": "ingress-nginx"}
    assert _admits(policy, "monitoring", prometheus)
    assert _admits(policy, "ingress-nginx", controller)
    assert _admits(policy, "spark", {"spark-role": "driver"})
    assert not _admits(policy, "default", {})
    assert not _admits(policy, "monitoring", {"app.kubernetes.io/name": "grafana"})


# --- labels ------------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """Refuses a mapping with a key twice (PyYAML keeps the last; the API server's decoder
    refuses the manifest)."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> Any:
    keys = [loader.construct_object(k) for k, _ in node.value]
    twice = sorted({str(k) for k in keys if keys.count(k) > 1})
    assert not twice, f"key(s) {twice} twice at {node.start_mark}"
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)

LABELLED = {
    "history": PG, "replicaCount": 2, "migrations": {"enabled": True},
    "commonLabels": {"team": "data", "app.kubernetes.io/part-of": "platform",
                     "release": "kube-prometheus-stack", "grafana_dashboard": "1"},
    "podLabels": {"team": "streaming", "sidecar.istio.io/inject": "false"},
    # The operators' selectors want these labels too: each appears once.
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "podMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "dashboards": {"enabled": True},
}


@pytest.mark.parametrize(
    "values",
    [pytest.param({}, id="defaults"), pytest.param(LABELLED, id="labelled")]
    + [pytest.param(ci_values(p), id=p.stem) for p in CI_FILES],
)
def test_no_rendered_manifest_has_a_key_twice(values: dict[str, Any]) -> None:
    for path, text in render(values).items():
        if not path.endswith(".txt"):
            list(yaml.load_all(text, Loader=_UniqueKeyLoader))  # noqa: S506 - a SafeLoader


def test_user_labels_join_the_chart_labels_without_touching_the_selector() -> None:
    docs = manifests(LABELLED)
    job = one(docs, "Job")
    assert job["metadata"]["labels"]["app.kubernetes.io/component"] == "migrations"
    assert job["metadata"]["labels"]["team"] == "data"
    deployment = one(docs, "Deployment")
    assert deployment["metadata"]["labels"]["app.kubernetes.io/part-of"] == "platform"
    pod = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod["team"] == "streaming" and pod["sidecar.istio.io/inject"] == "false"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod.items()


@pytest.mark.parametrize("where", ["commonLabels", "podLabels"])
@pytest.mark.parametrize("label", ["app.kubernetes.io/name", "app.kubernetes.io/instance",
                                   "app.kubernetes.io/component"])
def test_selector_labels_cannot_be_overridden(where: str, label: str) -> None:
    with pytest.raises(helm_python.HelmValuesError) as caught:
        validate_schema({where: {label: "other"}})
    assert f"/{where}" in str(caught.value), str(caught.value)
