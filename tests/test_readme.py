"""The README's promises that can drift from the code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from sparkwatch.cli.main import build_parser
from sparkwatch.cli.settings_table import render_cli_settings_table
from sparkwatch.model.tenant import TENANT_LABEL
from sparkwatch.settings import render_settings_table
from sparkwatch.settings.collector import render_settings_table as render_collector_table
from tests.conftest import ROOT


def readme() -> str:
    return (ROOT / "README.md").read_text()


def test_configuration_table_equals_the_settings_definitions() -> None:
    match = re.search(
        r"<!-- settings-table:start -->\n(.*)\n<!-- settings-table:end -->", readme(), re.S
    )
    assert match is not None, "README lost its settings-table markers"
    assert match.group(1) == render_settings_table(), (
        "README configuration table is stale: paste sparkwatch.settings.render_settings_table()"
    )


def test_the_collectors_settings_table_equals_its_settings_definitions() -> None:
    doc = (ROOT / "docs" / "collector.md").read_text()
    match = re.search(
        r"<!-- collector-settings:start -->\n(.*)\n<!-- collector-settings:end -->", doc, re.S
    )
    assert match is not None, "docs/collector.md lost its collector-settings markers"
    assert match.group(1) == render_collector_table(), (
        "docs/collector.md settings table is stale: paste "
        "sparkwatch.settings.collector.render_settings_table()"
    )
    # every flag of `sparkwatch collector --help` is in the table, with its environment variable
    assert match.group(1).count("SPARKWATCH_COLLECTOR_") == len(match.group(1).splitlines()) - 2


def test_the_commands_settings_table_equals_their_parsers() -> None:
    match = re.search(
        r"<!-- cli-settings:start -->\n(.*)\n<!-- cli-settings:end -->", readme(), re.S
    )
    assert match is not None, "README lost its cli-settings markers"
    assert match.group(1) == render_cli_settings_table(build_parser()), (
        "README's table of command options is stale: paste "
        "sparkwatch.cli.settings_table.render_cli_settings_table(build_parser())"
    )
    for row in ("| `--token` | `SPARKWATCH_TOKEN` | `doctor`, `top` |",
                "| `--spool-dir` | `SPARKWATCH_COLLECTOR_SPOOL_DIR` | `quarantine list`"):
        assert row in match.group(1)


def test_ci_runs_the_readme_test_command() -> None:
    assert "scripts/test" in readme()
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


@pytest.mark.prometheus
def test_the_scrape_config_passes_promtool_and_files_the_pushing_driver_under_its_tenant(
    promtool: str, tmp_path: Path
) -> None:
    text = readme()
    start = text.index("A Prometheus scrape config for drivers")
    block = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    assert block is not None, "README lost its scrape config"
    config = yaml.safe_load(block.group(1))
    token = tmp_path / "scrape-token"  # the README's path is on the user's Prometheus host
    token.write_text("a-scrape-token-of-the-collector")
    (collector,) = [job for job in config["scrape_configs"] if "authorization" in job]
    collector["authorization"]["credentials_file"] = str(token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    done = subprocess.run([promtool, "check", "config", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    drivers = next(job for job in config["scrape_configs"] if job["job_name"] == "spark-drivers")
    assert {TENANT_LABEL: "team-a"} in [group.get("labels") for group in
                                        drivers["static_configs"]]
