"""Runs each benchmark configuration in a fresh subprocess (its own JVM) and collects results."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import ROOT
from bench.listener.config import RunConfig

# Spark start-up and the first batch take seconds alone, far more on a busy machine.
STARTUP_ALLOWANCE_S = 420.0


class RunFailed(RuntimeError):
    pass


def run_child(cfg: RunConfig, log: Path) -> dict[str, Any]:
    """Run one configuration; its Spark output goes to ``log`` (kept when it fails)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    timeout = STARTUP_ALLOWANCE_S + cfg.seconds + cfg.drain_seconds
    with log.open("w") as out:
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "bench.listener.child", cfg.to_json()],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            msg = f"{describe(cfg)} timed out after {timeout:.0f} s; log: {log}"
            raise RunFailed(msg) from None
    if proc.returncode != 0:
        raise RunFailed(f"{describe(cfg)} exited with {proc.returncode}; log: {log}\n{tail(log)}")
    return json.loads(Path(cfg.result_path).read_text())


def tail(path: Path, lines: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def describe(cfg: RunConfig) -> str:
    return f"run kind={cfg.kind} queries={cfg.queries}"


def run_all(plan: list[RunConfig], keep_logs: bool, progress: Any = print) -> list[dict[str, Any]]:
    """Run ``plan`` one after another; paths in the configs are filled in here.

    Spark logs are deleted after a successful run unless ``keep_logs``; a failed run keeps them.
    """
    results = []
    logs = Path(tempfile.mkdtemp(prefix="sparkwatch-bench-logs-"))
    with tempfile.TemporaryDirectory(prefix="sparkwatch-bench-") as tmp:
        for i, cfg in enumerate(plan):
            name = f"{i:02d}-{cfg.kind}-{cfg.queries}q"
            cfg = replace(cfg, result_path=str(Path(tmp) / f"{name}.json"),
                          workdir=str(Path(tmp) / name))
            progress(f"[bench] {describe(cfg)}, {cfg.seconds:g} s window ...")
            results.append(run_child(cfg, logs / f"{name}.log"))
    if keep_logs:
        progress(f"[bench] Spark logs kept in {logs}")
    else:
        shutil.rmtree(logs, ignore_errors=True)
    return results
