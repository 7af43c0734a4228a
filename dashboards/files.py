"""Writing generated files, and the drift check against the committed copies.

Paths are relative to the dashboards package directory (``dashboards/`` in the repository).
Only the rules side is imported here: ``sparkwatch rules build`` must not need Grafana's SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sparkwatch.dashboards import promtool_tests, rulefiles
from sparkwatch.dashboards.config import Config

PACKAGE_DIR = Path(__file__).resolve().parent
OWNED_PREFIX = "generated/"


def rule_files(config: Config) -> dict[str, str]:
    """The rule files and their promtool unit tests."""
    return {**rulefiles.render(config), **promtool_tests.render(config)}


def owned_dirs(files: Mapping[str, str]) -> set[str]:
    """Generated directories: a file there that the build does not produce is left over."""
    return {str(Path(p).parent) for p in files if p.startswith(OWNED_PREFIX)}


def leftovers(files: Mapping[str, str], root: Path) -> list[str]:
    out = []
    for directory in sorted(owned_dirs(files)):
        for path in sorted((root / directory).glob("*")):
            relative = f"{directory}/{path.name}"
            if path.is_file() and relative not in files:
                out.append(relative)
    return out


def stale(files: Mapping[str, str], root: Path) -> list[str]:
    """Paths whose committed content differs from ``files``: missing, changed or left over."""
    return [p for p, text in files.items() if _read(root / p) != text] + leftovers(files, root)


def write(files: Mapping[str, str], root: Path) -> list[str]:
    """Write what changed and delete leftovers; returns the paths touched."""
    touched = []
    for relative, text in files.items():
        path = root / relative
        if _read(path) != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            touched.append(relative)
    for relative in leftovers(files, root):
        (root / relative).unlink()
        touched.append(relative)
    return touched


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
