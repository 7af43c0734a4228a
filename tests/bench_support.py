"""Runs a benchmark command in the test's process, as ``python -m bench`` would, with its
``--record`` written to a draft instead of docs/benchmarks.md."""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import COMMANDS


def run_bench(argv: list[str], doc: Path) -> int:
    """``python -m bench *argv`` (``argv[0]`` the benchmark) recording into ``doc``; its exit
    code. Only that benchmark's module is imported."""
    module = importlib.import_module(COMMANDS[argv[0]])
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPARKWATCH_BENCH_DOC", str(doc))
        return int(module.main(parser.parse_args(argv[1:]), argv))


def recorded_run(argv: list[str], tmp: Path) -> dict[str, Any]:
    """``argv`` run with ``--json`` and ``--record`` into ``tmp``: its exit code (``code``), the
    raw results (``raw``) and the recorded document (``doc``)."""
    raw, doc = tmp / "raw.json", tmp / "benchmarks.md"
    code = run_bench([*argv, "--json", str(raw), "--record"], doc)
    return {"code": code, "raw": json.loads(raw.read_text()), "doc": doc.read_text()}
