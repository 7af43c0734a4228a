"""The operator field table is the one list of StateOperatorProgress fields its consumers read."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sparkwatch.history.schema import OperatorBatch
from sparkwatch.history.views import StatePoint
from sparkwatch.metrics import catalogue as cat
from sparkwatch.model.events import StateOperator
from sparkwatch.model.fields import OPERATOR_FIELDS
from sparkwatch.model.parse import parse_state_operator
from tests.conftest import ROOT, load_fixture


def test_the_table_lists_every_state_operator_field_in_the_event_models_order() -> None:
    names = [f.name for f in dataclasses.fields(StateOperator)]
    assert names == ["index", "name", *(f.attr for f in OPERATOR_FIELDS), "custom_metrics"]


def test_every_field_has_a_history_column_of_its_name() -> None:
    columns = set(OperatorBatch.__table__.columns.keys())
    assert {f.attr for f in OPERATOR_FIELDS} <= columns


def test_the_parser_reads_every_field_from_sparks_json_name() -> None:
    raw = load_fixture("spark-4.3.0/chained_rocksdb.json")["progress"][-1]["stateOperators"][0]
    op = parse_state_operator(raw, 0)
    assert {f.attr: getattr(op, f.attr) for f in OPERATOR_FIELDS} == {
        f.attr: raw[f.json] for f in OPERATOR_FIELDS}


# --- a field added to the table flows everywhere -------------------------------------------------

MADE_UP = ('    OperatorField("numRowsMadeUp", "num_rows_made_up", "milliseconds", True, '
           '"Made-up time.", "made_up_time", "Made-up time, summed over batches.", '
           '"Made-up time in the last batch."),\n')
TABLE_END = '\n)\n"""In :class:`~sparkwatch.model.events.StateOperator`'
MADE_UP_MS = (1500, 250, 4000)
"""The made-up field's value in each progress of the run (Spark's milliseconds)."""
MADE_UP_LABELS = ('app_id="local-1",app_name="made-up",operator="{op}",operator_index="{index}",'
                  'query_id="{id}",query_name="{name}"')


def made_up_run(tmp_path: Path) -> dict[str, Any]:
    """What a fresh interpreter whose table has :data:`MADE_UP` as its last line makes of a real
    run whose first operator reports it (tests/fields_made_up.py)."""
    source = (ROOT / "sparkwatch" / "model" / "fields.py").read_text()
    assert source.count(TABLE_END) == 1
    table = tmp_path / "fields.py"
    table.write_text(source.replace(TABLE_END, "\n" + MADE_UP.rstrip("\n") + TABLE_END))
    run = load_fixture("spark-4.3.0/chained_rocksdb.json")
    run["progress"] = run["progress"][:len(MADE_UP_MS)]
    for progress, ms in zip(run["progress"], MADE_UP_MS, strict=True):
        progress["stateOperators"][0]["numRowsMadeUp"] = ms
    fixture = tmp_path / "run.json"
    fixture.write_text(json.dumps(run))
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fields_made_up.py"), str(table), str(fixture),
         f"sqlite:///{tmp_path / 'history.db'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {**json.loads(done.stdout), "run": run}


@pytest.fixture(scope="module")
def made_up(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return made_up_run(tmp_path_factory.mktemp("made_up"))


def test_a_field_added_to_the_table_is_an_attribute_of_the_event_model(
        made_up: dict[str, Any]) -> None:
    assert made_up["state_operator"] == [
        "index", "name", *(f.attr for f in OPERATOR_FIELDS), "num_rows_made_up",
        "custom_metrics"]


def test_a_field_added_to_the_table_is_parsed_from_its_json_name_and_in_the_openapi(
        made_up: dict[str, Any]) -> None:
    assert made_up["parsed"] == list(MADE_UP_MS)
    assert made_up["openapi"] is True


def test_a_field_added_to_the_table_is_a_history_column_written_and_read_back(
        made_up: dict[str, Any]) -> None:
    columns = made_up["columns"]
    assert columns[columns.index("num_state_store_instances") + 1] == "num_rows_made_up"
    assert columns[-1] == "custom_metrics"
    assert made_up["history"] == list(MADE_UP_MS)  # StatePoint, as the reader selects it


def test_a_field_added_to_the_table_has_its_catalogue_families_in_base_units(
        made_up: dict[str, Any]) -> None:
    labels = list(cat.OPERATOR_LABELS)
    assert made_up["catalogue"] == [
        ["spark_streaming_state_made_up_time_seconds_total", "counter",
         "Made-up time, summed over batches.", labels],
        ["spark_streaming_state_last_batch_made_up_time_seconds", "gauge",
         "Made-up time in the last batch.", labels],
    ]
    assert made_up["docs"] == [True, True]


def test_a_field_added_to_the_table_is_exposed_by_the_driver_and_the_collector(
        made_up: dict[str, Any]) -> None:
    progress = made_up["run"]["progress"]
    first, second = (MADE_UP_LABELS.format(id=progress[0]["id"], name=progress[0]["name"],
                                           op=op["operatorName"], index=index)
                     for index, op in enumerate(progress[-1]["stateOperators"]))
    total = sum(MADE_UP_MS) / 1000.0
    last = MADE_UP_MS[-1] / 1000.0
    # The second operator does not report the field: 0, as the parser reads a missing count.
    want = [
        "# HELP spark_streaming_state_made_up_time_seconds_total Made-up time, summed over "
        "batches.",
        "# TYPE spark_streaming_state_made_up_time_seconds_total counter",
        f"spark_streaming_state_made_up_time_seconds_total{{{first}}} {total}",
        f"spark_streaming_state_made_up_time_seconds_total{{{second}}} 0.0",
        "# HELP spark_streaming_state_last_batch_made_up_time_seconds Made-up time in the last "
        "batch.",
        "# TYPE spark_streaming_state_last_batch_made_up_time_seconds gauge",
        f"spark_streaming_state_last_batch_made_up_time_seconds{{{first}}} {last}",
        f"spark_streaming_state_last_batch_made_up_time_seconds{{{second}}} 0.0",
    ]
    assert made_up["driver"] == want
    assert made_up["collector"] == want


# --- who reads the table ------------------------------------------------------------------------

CONSUMERS = {
    "sparkwatch.model.events": "StateOperator's fields",
    "sparkwatch.model.parse": "reads each field from Spark's JSON name",
    "collector.typedwire": "the history writer's typed struct of an operator (JSON names, range)",
    "sparkwatch.model.contract": "each field's range, and the OpenAPI schema",
    "sparkwatch.history.schema": "operator_batches' columns",
    "sparkwatch.history.rows": "the operator_batches row of an operator",
    "sparkwatch.history.views": "StatePoint's fields (what the reader selects and returns)",
    "sparkwatch.history.rollups": "the counters summed per bucket (those operator_rollups has)",
    "sparkwatch.metrics.catalogue": "the state families (names, kinds, help, units)",
    "sparkwatch.metrics.state": "the counters summed into totals",
    "sparkwatch.metrics.exposition": "each family's value in base units (the catalogue's groups)",
}
"""Every module that takes operator fields from the table, and what it takes."""


TABLE_GROUPS = {"STATE_SIZES", "STATE_TOTALS", "STATE_LASTS", "STATE_LAYOUT", "StateFamilies"}
"""The catalogue's groups of (field, family): reading them is reading the table."""


def _reads_the_table(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "sparkwatch.model.fields":
            return True
        if isinstance(node, ast.Attribute) and node.attr in TABLE_GROUPS:
            return True
    return False


def test_the_modules_that_consume_the_table_are_exactly_the_listed_ones() -> None:
    found = set()
    for room in ("sparkwatch", "collector", "listener", "dashboards"):
        for path in sorted((ROOT / room).rglob("*.py")):
            if _reads_the_table(ast.parse(path.read_text())):
                found.add(".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert found == set(CONSUMERS)


# --- the type checker's view of the generated classes ----------------------------------------


def _stub_fields(path: Path, name: str) -> list[tuple[str, str]]:
    """(field, annotation) of the ``if TYPE_CHECKING:`` class ``name`` in ``path``."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            for cls in node.body:
                if isinstance(cls, ast.ClassDef) and cls.name == name:
                    return [(a.target.id, ast.unparse(a.annotation)) for a in cls.body
                            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)]
    raise AssertionError(f"no TYPE_CHECKING stub of {name} in {path}")


def _runtime_fields(cls: type) -> list[tuple[str, str]]:
    def spelled(t: Any) -> str:
        return t.__name__ if isinstance(t, type) and not getattr(t, "__args__", None) else str(t)
    return [(f.name, spelled(f.type)) for f in dataclasses.fields(cls)]


@pytest.mark.parametrize(("path", "cls", "aliases"), [
    ("sparkwatch/model/events.py", StateOperator,
     {"Mapping[str, int | float]": "collections.abc.Mapping[str, int | float]"}),
    ("sparkwatch/history/views.py", StatePoint,
     {"dict[str, Any]": "dict[str, typing.Any]"}),
], ids=["StateOperator", "StatePoint"])
def test_the_type_checking_stub_has_the_generated_classs_fields_in_order(
        path: str, cls: type, aliases: dict[str, str]) -> None:
    stub = [(name, aliases.get(t, t)) for name, t in _stub_fields(ROOT / path, cls.__name__)]
    assert stub == _runtime_fields(cls)
