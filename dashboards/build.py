"""The dashboards as files: JSON per dashboard, and ``docs/dashboards.md`` in a source checkout."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sparkwatch.dashboards import docs, history, overview, state_store, watermark
from sparkwatch.dashboards.config import Config
from sparkwatch.dashboards.files import PACKAGE_DIR
from sparkwatch.dashboards.profile_fit import fit
from sparkwatch.dashboards.scope import scoped
from sparkwatch.dashboards.skeleton import to_text

GRAFANA_DIR = "generated/grafana"
DOCS_FILE = "../docs/dashboards.md"

BOARDS: dict[str, Callable[[Config], dict[str, Any]]] = {
    "sparkwatch-overview.json": overview.build,
    "sparkwatch-state-store.json": state_store.build,
    "sparkwatch-watermark.json": watermark.build,
    "sparkwatch-history.json": history.build,
    "sparkwatch-history-sqlite.json": history.build_sqlite,
}


def dashboards(config: Config) -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON data, cut to the config's metric profile and narrowed by its
    selector."""
    return {file_name: scoped(fit(make(config), config), config.selector)
            for file_name, make in BOARDS.items()}


def in_source_checkout() -> bool:
    # An installed package has no docs/ beside it: then the docs are not written.
    return (PACKAGE_DIR.parent / "docs").is_dir() and (
        PACKAGE_DIR.parent / "pyproject.toml"
    ).exists()


def dashboard_files(config: Config, with_docs: bool = True) -> dict[str, str]:
    boards = dashboards(config)
    files = {f"{GRAFANA_DIR}/{name}": to_text(board) for name, board in boards.items()}
    if with_docs:
        files[DOCS_FILE] = docs.render(boards)
    return files
