"""The memory benchmark keeps working: a tiny real run (a collector process, a 1 MiB body limit,
two requests at once) that samples the collector's and its history writer's memory in every phase
and records the table.

Memory figures are not judged here (they live in docs/benchmarks.md); only that every phase ran,
was answered, and its figures are measured and reported as the table says.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.record import markers
from tests.bench_support import recorded_run


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return recorded_run(["memory", "--quick"], tmp_path_factory.mktemp("memory"))


@pytest.mark.timeout(180)  # a hang guard; the run takes ~5 s
def test_every_phase_is_answered_and_measured(smoke: dict[str, Any]) -> None:
    assert smoke["code"] == 0
    raw = smoke["raw"]
    assert raw["limit"] == 1 << 20 and raw["concurrent"] == 2
    phases = {p["name"]: p for p in raw["phases"]}
    assert list(phases) == ["one request", "one request, gzip", "2 requests at once"]
    for phase in phases.values():
        assert 0 < phase["idle_collector_mib"] < phase["idle_total_mib"], "the writer counted"
        assert phase["idle_writer_mib"] > 0 and phase["peak_writer_mib"] > 0
        assert sum(phase["statuses"].values()) == phase["requests"]
        assert set(phase["statuses"]) <= {"200", "503"}
        assert 0.9 * raw["limit"] < phase["body_bytes"] <= raw["limit"]
        assert phase["peak_collector_mib"] >= phase["idle_collector_mib"] * 0.9
        assert phase["peak_total_mib"] > phase["peak_collector_mib"]


def test_the_recorded_table_shows_each_phase_over_idle(smoke: dict[str, Any]) -> None:
    begin, end = markers("memory")
    block = smoke["doc"].split(begin, 1)[1].split(end, 1)[0]
    assert "python -m bench memory --quick" in block
    for phase in smoke["raw"]["phases"]:
        row = next(line for line in block.splitlines() if line.startswith(f"| {phase['name']} |"))
        assert f"| {phase['idle_collector_mib']:.0f} → {phase['peak_collector_mib']:.0f} |" in row
