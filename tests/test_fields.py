"""The operator field table is the one list of StateOperatorProgress fields its consumers read."""

from __future__ import annotations

import dataclasses

from sparkwatch.history.schema import OperatorBatch
from sparkwatch.model.events import StateOperator
from sparkwatch.model.fields import OPERATOR_FIELDS
from sparkwatch.model.parse import parse_state_operator
from tests.conftest import load_fixture


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
