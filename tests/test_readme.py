"""The README's promises that can drift from the code."""

from __future__ import annotations

import re

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


def test_ci_runs_the_readme_test_command() -> None:
    assert "scripts/test" in readme()
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
