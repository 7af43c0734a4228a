"""`sparkwatch doctor --collector`: the same recorded histories pushed to a real collector
process (PostgreSQL history) and diagnosed through its read API. The collector has progress, not
plans: growth is found without claiming its cause."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sparkwatch.cli.main import main
from sparkwatch.model.events import AppInfo, EventKind
from sparkwatch.model.parse import envelope_from_json, envelope_to_dict
from tests.doctor_support import recorded
from tests.support import wait_for
from tests.test_collector_support import READ_TOKEN, TOKEN, Collector, database_collector

pytestmark = pytest.mark.postgres

PUSHED = ("agg_no_watermark", "late_data", "healthy")


def wire_events(name: str) -> list[dict[str, Any]]:
    data = recorded(name)
    app = AppInfo(**data["app"])
    return [
        envelope_to_dict(envelope_from_json(EventKind(e["kind"]), e["json"], app, e["received_at"]))
        for e in data["events"]
    ]


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("doctor") / "spool",
                            env={"SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN}) as c:
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for name in PUSHED:
            response = httpx.post(c.ingest_url, json={"events": wire_events(name)}, headers=auth)
            assert response.status_code < 300, response.text
        wait_for(lambda: _recorded(c) == len(PUSHED), 30, "the collector to write the runs")
        yield c


def _recorded(c: Collector) -> int:
    response = httpx.get(c.url + "/api/v1/queries",
                         headers={"Authorization": f"Bearer {READ_TOKEN}"})
    return sum(1 for q in response.json() if q["batches"] >= 6) if response.is_success else 0


def test_doctor_reads_a_collector(collector: Collector, capsys) -> None:
    code = main(["doctor", "--collector", collector.url, "--token", READ_TOKEN,
                 "--format", "json", "--fail-on", "error"])
    data = json.loads(capsys.readouterr().out)
    by_query = {c["name"]: c for c in data["checked"]}
    assert set(by_query) == set(PUSHED)
    assert {c["plan"] for c in data["checked"]} == {"none"}
    found = sorted((f["query_name"], f["code"], f["severity"]) for f in data["findings"])
    assert found == [
        ("agg_no_watermark", "state-growing-without-removals", "warning"),
        ("late_data", "late-rows-dropped", "error"),
    ]
    late = next(f for f in data["findings"] if f["code"] == "late-rows-dropped")
    assert late["numbers"]["delay_ms"] == 2000  # estimated from the progress alone
    assert code == 1


def test_one_query_and_errors(collector: Collector, capsys) -> None:
    code = main(["doctor", "--collector", collector.url, "--token", READ_TOKEN, "healthy"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("checked 1 query: no findings")
    code = main(["doctor", "--collector", collector.url, "--token", "wrong"])
    assert code == 2 and "answered 401" in capsys.readouterr().err
    code = main(["doctor", "--collector", collector.url, "--token", READ_TOKEN, "nope"])
    assert code == 2 and "nope" in capsys.readouterr().err
