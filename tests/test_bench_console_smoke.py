"""The console benchmark keeps working: a tiny population (4,000 operator rows) on SQLite and on
PostgreSQL is built, both pages are fetched and the block is recorded. Timing is judged in
docs/benchmarks.md, not here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from bench.record import markers
from tests.conftest import ROOT
from tests.support import create_database, drop_database


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_a_small_run_times_both_pages_on_both_databases(pg_admin_url: str,
                                                         tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    name = create_database(pg_admin_url)
    url = sa.engine.make_url(pg_admin_url).set(database=name)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bench", "console", "--rows", "4000", "--queries", "4",
             "--requests", "5", "--sqlite", str(tmp_path / "console.db"),
             "--pg-url", url.render_as_string(hide_password=False), "--record"],
            capture_output=True, text=True, cwd=ROOT, timeout=280,
            env={**os.environ, "SPARKWATCH_BENCH_DOC": str(doc)})
    finally:
        drop_database(pg_admin_url, name)
    # 1: a page over the goal on a loaded machine; the block is recorded either way.
    assert done.returncode in (0, 1), done.stderr[-3000:]
    begin, end = markers("console")
    block = doc.read_text().split(begin, 1)[1].split(end, 1)[0]
    assert "4,000 operator rows (500 batches x 2 operators x 4 queries" in block
    for backend in ("sqlite", "postgresql"):
        for page in ("/ (every query)", "/queries/<id>, last hour"):
            assert f"| {backend} | {page} | 5 |" in block
