"""Property-based checks of the validation contract (hypothesis, bounded examples): over arbitrary
JSON and mutated real progress events, the listener exports only what the collector accepts, and
the collector answers only 2xx/4xx, storing and rendering everything it accepted."""

from __future__ import annotations

import copy
import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkwatch.collector.body import BodyError, events_of
from sparkwatch.collector.ingest import check_events
from sparkwatch.model.contract import ContractViolation
from sparkwatch.model.events import AppInfo, EventKind
from sparkwatch.model.parse import EventParseError, envelope_to_dict, listener_event
from tests.conftest import load_fixture
from tests.support import wait_for
from tests.test_collector_support import TOKEN, Collector, count_rows, database_collector, samples

PROFILE = settings(max_examples=60, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REAL = load_fixture("spark-4.3.0/chained_rocksdb.json")["progress"][-1]
APP = AppInfo("property-app", "app-property-0001", "4.3.0")

hostile_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["\x00", "\ud800", "<script>alert(1)</script>", '"\\\n', "x" * 5000]),
)
json_values = st.recursive(
    hostile_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


PATHS = [p for p in _paths(REAL) if p]


@st.composite
def mutated_progress(draw: st.DrawFn) -> dict[str, Any]:
    """A real progress with one to three values replaced by hostile JSON."""
    payload = copy.deepcopy(REAL)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(PATHS))
        holder: Any = payload
        try:
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced the parent
    payload.update(id=str(uuid.uuid4()), runId=str(uuid.uuid4()))
    return payload


def _spark_json(payload: dict[str, Any]) -> str | None:
    """As PySpark's own JSON writer would write it (NaN literals allowed); None if Python
    cannot write it at all (e.g. a lone surrogate under ensure_ascii=False)."""
    try:
        return json.dumps(payload)
    except (ValueError, RecursionError):
        return None


@PROFILE
@given(mutated_progress())
def test_the_listener_exports_only_what_the_collector_accepts(payload: dict[str, Any]) -> None:
    raw = _spark_json(payload)
    if raw is None:
        return
    try:
        parsed = listener_event(EventKind.PROGRESS, raw, APP, 1795252542.5)
    except EventParseError:
        return  # refused in the driver, counted there: never exported
    wire = json.dumps({"events": [envelope_to_dict(parsed.envelope)]}).encode()
    items, strict = events_of(wire, 10)
    [result] = check_events(items, wire if strict else None)
    assert not isinstance(result, ContractViolation), result
    accepted, encoded = result
    encoded = encoded or orjson.dumps(envelope_to_dict(accepted.envelope))
    assert accepted.event == parsed.event
    assert json.loads(encoded)["payload"]["id"] == payload["id"]


@PROFILE
@given(st.one_of(json_values, st.builds(lambda e: {"events": e}, st.lists(json_values,
                                                                          max_size=3))))
def test_arbitrary_json_is_refused_with_a_named_reason_or_accepted_whole(doc: Any) -> None:
    try:
        body = json.dumps(doc).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError):
        return
    try:
        items, strict = events_of(body, 10)
        results = check_events(items, body if strict else None)
    except BodyError as exc:
        assert 400 <= exc.status < 500 and str(exc)
        return
    for result in results:
        if isinstance(result, ContractViolation):
            assert ": " in str(result)  # "<field path>: <what is wrong>"


# --- against a real collector with a PostgreSQL history --------------------------------------


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("properties") / "spool") as c:
        yield c


def _wire(payload: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "progress", "app": {"name": "property-app", "id": "app-p-1",
                                        "spark_version": "4.3.0"},
            "received_at": 1795252542.5, "payload": payload}


@pytest.mark.postgres
def test_a_real_collector_answers_2xx_or_4xx_and_keeps_all_it_accepted(
    collector: Collector, promtool: str
) -> None:
    accepted: list[str] = []

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutated_progress())
    def push(payload: dict[str, Any]) -> None:
        try:
            body = json.dumps({"events": [_wire(payload)]}).encode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):
            return
        response = httpx.post(collector.ingest_url, content=body, timeout=30, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})
        assert response.status_code < 500, response.text
        if response.status_code == 200 and response.json()["accepted"] == 1:
            accepted.append(payload["runId"])

    push()
    assert accepted, "no mutated event was accepted: the property proves nothing"
    wait_for(lambda: count_rows(
        collector.history_url, "select count(*) from batches where run_id = any(:r)",
        r=accepted) == len(accepted), 60, "every accepted event in the history")
    text = collector.metrics()
    rendered = {labels["query_id"] for labels, _ in
                samples(text, "spark_streaming_query_batches_total")}
    assert len(rendered) >= len(accepted)
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert (check.returncode, check.stdout, check.stderr) == (0, "", "")
