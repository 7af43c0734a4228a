"""The ceiling benchmark keeps working: a tiny real run (the collector's own stages in process, the
history writer and one raw row per event into fresh PostgreSQL databases) that reports every
stage, both database loads, and the cores a target rate takes.

Speed is not checked here (figures live in docs/benchmarks.md); only that every figure is there,
measured, and adds up as the summary says.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa

from bench.record import markers
from tests.bench_support import recorded_run

pytestmark = pytest.mark.postgres
EVENTS = 600


@pytest.fixture(scope="module")
def smoke(pg_admin_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("ceiling")
    admin = sa.engine.make_url(pg_admin_url).render_as_string(hide_password=False)
    return recorded_run(["ceiling", "--events", str(EVENTS), "--queries", "50", "--batch", "100",
                         "--per-tx", "100", "--target", "20000", "--pg-admin-url", admin], tmp)


@pytest.mark.timeout(180)  # a hang guard; the run takes ~10 s
def test_every_stage_of_both_sides_is_measured(smoke: dict[str, Any]) -> None:
    assert smoke["code"] == 0
    stages = {(s["side"], s["name"]): s["us_per_event"] for s in smoke["raw"]["stages"]}
    assert {side for side, _ in stages} == {"ingest", "history", "floor"}
    # The stages the collector runs now: the typed read at ingest and again in the writer.
    assert ("ingest", "decode and validate, typed (msgspec)") in stages
    assert ("history", "read back from the spool, typed (msgspec)") in stages
    assert ("history", "build the history rows (7 per event) and their COPY values") in stages
    assert all(us > 0 for us in stages.values()), stages


def test_both_database_loads_write_half_the_events_timed(smoke: dict[str, Any]) -> None:
    for key in ("history", "minimal"):
        cost = smoke["raw"][key]
        assert cost["events"] == EVENTS // 2, key
        assert cost["seconds"] > 0 and cost["client_us"] > 0, key
        # The server's CPU is read in clock ticks (10 ms): a smoke load of a few hundred rows
        # can fall within one, so zero is a measurement here, not a missing one.
        assert cost["server_us"] >= 0, key


def test_the_summary_costs_the_target_from_the_measured_stages(smoke: dict[str, Any]) -> None:
    raw, doc = smoke["raw"], smoke["doc"]
    begin, end = markers("ingest-ceiling")
    block = doc.split(begin, 1)[1].split(end, 1)[0]
    least = next(line for line in block.splitlines() if line.startswith("- the least"))
    us, cores = re.search(r": (\d+) µs; 20,000 events/s takes ([\d.]+) cores", least).groups()
    stages = {s["name"]: s["us_per_event"] for s in raw["stages"]}
    expected = (stages["inflate the gzip request"] + stages["decode JSON"]
                + raw["minimal"]["client_us"] + raw["minimal"]["server_us"])
    assert int(us) == round(expected)
    assert float(cores) == pytest.approx(expected * 20_000 / 1e6, abs=0.01)
    ingest = next(line for line in block.splitlines() if line.startswith("- ingest alone"))
    us, cores = re.search(r": (\d+) µs; 20,000 events/s takes ([\d.]+) cores", ingest).groups()
    assert int(us) == round(sum(s["us_per_event"] for s in raw["stages"]
                                if s["side"] == "ingest"))
    assert float(cores) == pytest.approx(int(us) * 20_000 / 1e6, abs=0.02)
