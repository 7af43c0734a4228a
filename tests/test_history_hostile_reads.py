"""A SQLite history's rows of another shape than the writer writes, read by the collector's API
and the browser console: a custom metrics column holding JSON that is no object (a list, a
string, a number), plan settings whose values are no text, NaN and infinities in a metrics map.
Each answer is the data (an empty map where no map is held, settings as text, a non-finite
number as null, the same through the API and the CLI), never a 500 or a broken page."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from sparkwatch.console.app import Console
from sparkwatch.console.history import HistoryData
from sparkwatch.history import migrate
from sparkwatch.history.schema import OperatorPlan
from tests.support import run_cli
from tests.test_collector_support import READ_TOKEN, Collector, running
from tests.test_console_pages import _html
from tests.test_history_support import (
    batch_of,
    engine_for,
    load_sample,
    progress,
    started,
    write,
)

AGG = load_sample("window_agg")
NOT_MAPS = {
    "b1000000-0000-4000-8000-000000000001": "[1, 2]",
    "b1000000-0000-4000-8000-000000000002": '"text"',
    "b1000000-0000-4000-8000-000000000003": "5",
}
"""A query per custom metrics column holding JSON that is no object."""
NAN_QUERY = "b2000000-0000-4000-8000-000000000001"
PLANNED_QUERY = "b1000000-0000-4000-8000-000000000001"
SETTINGS = '{"spark.x": 5, "spark.y": true, "spark.z": [1], "spark.sql.shuffle.partitions": "8"}'


def _run_id(query_id: str) -> str:
    return "r" + query_id[1:]  # as unique as the query id


def _run(url: str, query_id: str, metrics: str) -> None:
    """A run of two batches through the writer, its state rows' custom metrics then set to the
    JSON text ``metrics`` as another program could (SQLite keeps any JSON text)."""
    run_id = _run_id(query_id)
    write(url, started(query_id, run_id, f"q-{query_id[-1]}", "2026-11-21T09:00:00.000Z"),
          *(progress(batch_of(AGG, b, f"2026-11-21T09:0{b + 1}:00.000Z", id=query_id,
                              runId=run_id, name=f"q-{query_id[-1]}")) for b in range(2)))
    with engine_for(url).begin() as conn:
        conn.exec_driver_sql("UPDATE operator_batches SET custom_metrics = ? WHERE run_id = ?",
                             (metrics, run_id))


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('hostile-reads') / 'history.db'}"
    migrate.upgrade(url)
    for query_id, metrics in NOT_MAPS.items():
        _run(url, query_id, metrics)
    _run(url, NAN_QUERY, '{"x": NaN, "y": Infinity, "z": -Infinity, "w": 1e999, "n": 3}')
    with engine_for(url).begin() as conn:
        conn.execute(sa.insert(OperatorPlan), [{
            "run_id": _run_id(PLANNED_QUERY), "operator_index": 0, "query_id": PLANNED_QUERY,
            "read_at": datetime(2026, 11, 21, 9, 1, tzinfo=UTC), "batch_id": 0,
            "source": "plan", "note": None, "operator_name": "stateStoreSave",
            "kind": "aggregation", "keys": ["k"], "details": {}, "settings": {}}])
        conn.exec_driver_sql("UPDATE operator_plans SET settings = ?", (SETTINGS,))
    return url


@pytest.fixture(scope="module")
def collector(history: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    spool = tmp_path_factory.mktemp("hostile-reads-spool")
    with running(Collector(history, Path(spool), env={
            "SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN})) as c:
        yield c


def _state(collector: Collector, query_id: str) -> list[dict[str, Any]]:
    response = collector.get(f"/api/v1/queries/{query_id}/state", READ_TOKEN)
    assert response.status_code == 200, response.text  # was a 500
    answer: list[dict[str, Any]] = response.json()
    return answer


@pytest.mark.parametrize("query_id", NOT_MAPS)
def test_the_state_api_serves_custom_metrics_that_are_no_json_object_as_an_empty_map(
        collector: Collector, query_id: str) -> None:
    points = _state(collector, query_id)
    assert [(p["batch_id"], p["custom_metrics"]) for p in points] == [(0, {}), (1, {})]
    assert [p["num_rows_total"] for p in points] == [AGG["stateOperators"][0]["numRowsTotal"]] * 2


def test_the_plans_api_serves_setting_values_that_are_no_text_as_their_json_text(
        collector: Collector) -> None:
    response = collector.get(f"/api/v1/queries/{PLANNED_QUERY}/plans", READ_TOKEN)
    assert response.status_code == 200, response.text  # was a 500: dict[str, str] promised
    [plan] = response.json()
    assert plan["settings"] == {"spark.x": "5", "spark.y": "true", "spark.z": "[1]",
                                "spark.sql.shuffle.partitions": "8"}
    assert [op["operator"] for op in plan["operators"]] == ["stateStoreSave"]


def test_nan_in_custom_metrics_is_null_alike_through_the_api_and_the_cli(
        collector: Collector, history: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI wrote "NaN" and "Infinity" where the API, reading the same history, wrote null."""
    served = _state(collector, NAN_QUERY)
    code, out, err = run_cli(capsys, "history", "state", NAN_QUERY, "--format", "json",
                             "--url", history)
    assert (code, err) == (0, "")
    printed = json.loads(out, parse_constant=lambda constant: pytest.fail(constant))
    assert printed == served
    assert [p["custom_metrics"] for p in printed] == [
        {"x": None, "y": None, "z": None, "w": None, "n": 3}] * 2


@pytest.mark.parametrize("query_id", [*NOT_MAPS, NAN_QUERY])
def test_the_console_draws_the_page_of_a_query_whose_custom_metrics_are_no_json_object(
        history: str, query_id: str) -> None:
    data = HistoryData(history)
    try:
        html = _html(Console(data, lambda _tenant: []), f"/queries/{query_id}", range="all")
    finally:
        data.close()
    assert '<section class="operator" id="op-0">' in html
    assert f"q-{query_id[-1]}" in html
