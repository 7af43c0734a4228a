"""The README's promises that can drift from the code."""

from __future__ import annotations

import re

from sparkwatch.collector.config import render_settings_table as render_collector_table
from sparkwatch.settings import render_settings_table
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
        "sparkwatch.collector.config.render_settings_table()"
    )
    # every flag of `sparkwatch collector --help` is in the table, with its environment variable
    assert match.group(1).count("SPARKWATCH_COLLECTOR_") == len(match.group(1).splitlines()) - 2


def test_ci_runs_the_readme_test_command() -> None:
    assert "scripts/test" in readme()
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
