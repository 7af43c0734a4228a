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


VIOLATIONS = [
    pytest.param("model/leak.py", "from sparkwatch.collector import ingest",
                 "sparkwatch.model is not allowed to import sparkwatch.collector",
                 id="the shared model importing the collector breaks the layers"),
    pytest.param("listener/leak.py", "import fastapi",
                 "sparkwatch.listener is not allowed to import fastapi",
                 id="the listener importing the web stack breaks the driver rule"),
    # Only sparkwatch.otlp may import the SDK: the listener reaches it through that room, lazily.
    pytest.param("listener/leak.py", "from opentelemetry.sdk.metrics import export",
                 "sparkwatch.listener is not allowed to import opentelemetry",
                 id="the listener importing opentelemetry itself breaks the otlp rule"),
    pytest.param("terminal.py", "from sparkwatch.demo import table",
                 "sparkwatch.terminal is not allowed to import sparkwatch.demo",
                 id="a shared module importing a room breaks its rule"),
]


@pytest.mark.parametrize(("module", "line", "broken"), VIOLATIONS)
def test_a_deliberate_violation_breaks_its_rule(installed: Path, module: str, line: str,
                                                broken: str) -> None:
    path = installed / "sparkwatch" / module
    before = path.read_text() if path.exists() else ""
    path.write_text(f"{before}\n{line}  # noqa: E402\n")
    result = lint_imports(installed)
    assert result.returncode != 0
    assert broken in result.stdout
