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


def test_the_shared_model_importing_the_collector_breaks_the_layers(installed: Path) -> None:
    (installed / "sparkwatch" / "model" / "leak.py").write_text(
        "from sparkwatch.collector import ingest\n")
    result = lint_imports(installed)
    assert result.returncode != 0
    assert "sparkwatch.model is not allowed to import sparkwatch.collector" in result.stdout


def test_the_listener_importing_the_web_stack_breaks_the_driver_rule(installed: Path) -> None:
    (installed / "sparkwatch" / "listener" / "leak.py").write_text("import fastapi\n")
    result = lint_imports(installed)
    assert result.returncode != 0
    assert "sparkwatch.listener is not allowed to import fastapi" in result.stdout


def test_the_listener_importing_opentelemetry_itself_breaks_the_otlp_rule(installed: Path) -> None:
    # Only sparkwatch.otlp may import the SDK: the listener reaches it through that room, lazily.
    (installed / "sparkwatch" / "listener" / "leak.py").write_text(
        "from opentelemetry.sdk.metrics import export\n")
    result = lint_imports(installed)
    assert result.returncode != 0
    assert "sparkwatch.listener is not allowed to import opentelemetry" in result.stdout


def test_a_shared_module_importing_a_room_breaks_its_rule(installed: Path) -> None:
    (installed / "sparkwatch" / "terminal.py").write_text(
        (installed / "sparkwatch" / "terminal.py").read_text()
        + "\nfrom sparkwatch.demo import table  # noqa: E402\n")
    result = lint_imports(installed)
    assert result.returncode != 0
    assert "sparkwatch.terminal is not allowed to import sparkwatch.demo" in result.stdout
