"""The rooms' import rules (pyproject.toml ``[tool.importlinter]``, docs/architecture.md) hold,
and a deliberate violation breaks them.

The folders install as sub-packages of ``sparkwatch`` (``collector/`` is ``sparkwatch.collector``),
which import-linter cannot see in the source tree: it reads a copy laid out as installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import UNMEASURED

pytestmark = UNMEASURED  # import-linter reads a copy of the product and runs none of it
ROOT = Path(__file__).resolve().parents[1]
ROOMS_AT_TOP = ("listener", "collector", "dashboards", "migrations")


@pytest.fixture()
def installed(tmp_path: Path) -> Path:
    """The package's Python files, laid out as an installed wheel has them."""
    package = tmp_path / "sparkwatch"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "generated", "tests")
    shutil.copytree(ROOT / "sparkwatch", package, ignore=ignore)
    for room in ROOMS_AT_TOP:
        shutil.copytree(ROOT / room, package / room, ignore=ignore)
    return tmp_path


def lint_imports(layout: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(layout)}
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
         "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=layout, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_every_import_contract_is_kept(installed: Path) -> None:
    result = lint_imports(installed)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


# (module that imports, what it imports, the rule that breaks: "<room> is not allowed to import
# <forbidden>")
VIOLATIONS = [
    ("model.leak", "sparkwatch.collector.ingest", "sparkwatch.model", "sparkwatch.collector"),
    ("listener.leak", "fastapi", "sparkwatch.listener", "fastapi"),
    # Only sparkwatch.otlp may import the SDK: the listener reaches it through that room, lazily.
    ("listener.leak", "opentelemetry.sdk.metrics", "sparkwatch.listener", "opentelemetry"),
    ("terminal", "sparkwatch.demo.table", "sparkwatch.terminal", "sparkwatch.demo"),
]


@pytest.mark.parametrize(("module", "imported", "room", "forbidden"), VIOLATIONS, ids=[
    "the shared model importing the collector breaks the layers",
    "the listener importing the web stack breaks the driver rule",
    "the listener importing opentelemetry itself breaks the otlp rule",
    "a shared module importing a room breaks its rule",
])
def test_a_deliberate_violation_breaks_its_rule(installed: Path, module: str, imported: str,
                                                room: str, forbidden: str) -> None:
    path = (installed / "sparkwatch" / module.replace(".", "/")).with_suffix(".py")
    before = path.read_text() if path.exists() else ""
    path.write_text(f"{before}\nimport {imported}  # noqa: E402\n")
    result = lint_imports(installed)
    assert result.returncode != 0
    assert f"{room} is not allowed to import {forbidden}" in result.stdout
