"""Writes a benchmark's generated results into its marked block of docs/benchmarks.md.

Only the text between ``<!-- bench:<name>:begin -->`` and ``<!-- bench:<name>:end -->`` is
replaced, so hand-written interpretation around it survives a re-run.
"""

from __future__ import annotations

from pathlib import Path

HEADER = "# Benchmarks\n\nFigures from `python -m bench ...` (see `bench/`). Re-run to update.\n"


def markers(name: str) -> tuple[str, str]:
    return f"<!-- bench:{name}:begin -->", f"<!-- bench:{name}:end -->"


def write_block(doc: Path, name: str, title: str, body: str) -> None:
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
