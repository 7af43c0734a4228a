"""Writes a benchmark's generated results into its marked block of docs/benchmarks.md.

Only the text between ``<!-- bench:<name>:begin -->`` and ``<!-- bench:<name>:end -->`` is
replaced, so hand-written interpretation around it survives a re-run.
"""

from __future__ import annotations

import os
from pathlib import Path

HEADER = "# Benchmarks\n\nFigures from `python -m bench ...` (see `bench/`). Re-run to update.\n"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def doc_path(default: Path) -> Path:
    """Where ``--record`` writes: ``SPARKWATCH_BENCH_DOC`` when set (drafts), else ``default``."""
    override = os.environ.get("SPARKWATCH_BENCH_DOC")
    return Path(override) if override else default


def write_block(doc: Path, name: str, title: str, body: str) -> None:
    doc = doc_path(doc)
    begin, end = markers(name)
    block = f"{begin}\n{body.strip()}\n{end}"
    text = doc.read_text() if doc.exists() else HEADER
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + f"\n\n## {title}\n\n{block}\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)
