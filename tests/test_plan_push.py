"""Operator identity in push mode: a run's plan travels with its events to the collector, which
validates it like any event (a refusal names the field), serves it in /metrics, writes it to the
history and answers it to `doctor --collector` and `top`."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sparkwatch.collector.body import events_of
from sparkwatch.collector.ingest import check_events
from sparkwatch.model.contract import LIMITS, ContractViolation
from sparkwatch.model.events import AppInfo
from sparkwatch.model.parse import envelope_to_dict
from sparkwatch.plan.model import QueryPlan
from sparkwatch.plan.wire import plan_event_to_dict, plan_from_wire, plan_to_wire
from tests.doctor_support import events_of as recorded_events
from tests.doctor_support import plan_of, recorded
from tests.hostile import body_of
from tests.support import wait_for
from tests.test_collector_support import (
    READ_TOKEN,
    Collector,
    count_rows,
    database_collector,
    samples,
)

SCENARIO = "join_no_bounds"
RESTORED = "plans of running runs restored to /metrics"


def _recorded_run(query_id: str, run_id: str) -> tuple[AppInfo, list[dict[str, Any]], QueryPlan]:
    """A real recorded run (events and executed plan) under new ids, as wire entries."""
    data = recorded(SCENARIO)
    events = recorded_events(data)
    plan = plan_of(data, events)
    wire = []
    for parsed in events:
        entry = envelope_to_dict(parsed.envelope)
        entry["payload"] = {**entry["payload"], "id": query_id, "runId": run_id}
        wire.append(entry)
    # Every field kept (trigger and its interval included), only the ids new.
    return events[0].app, wire, dataclasses.replace(plan, query_id=query_id, run_id=run_id)


def _plan_entry() -> dict[str, Any]:
    app, _, plan = _recorded_run(str(uuid.uuid4()), str(uuid.uuid4()))
    return plan_to_wire(app, plan, 1795252542.5)


def _verdict(entry: dict[str, Any], raw: bool = False) -> str:
    body = body_of([entry]) if raw else json.dumps({"events": [entry]}).encode()
    items, strict = events_of(body, 10)
    [result] = check_events(items, body if strict else None)
    return str(result) if isinstance(result, ContractViolation) else "accepted"


def test_a_plan_round_trips_through_the_wire_whole() -> None:
    app, _, plan = _recorded_run("q-1", "r-1")
    entry = plan_to_wire(app, plan, 1795252542.5)
    back = plan_from_wire(json.loads(json.dumps(entry)))
    assert back.plan == plan and back.app == app
    assert plan_event_to_dict(back) == entry
    assert {op.kind for op in back.plan.operators} == {"stream_stream_join"}


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    entry = _plan_entry()
    holder = entry
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return entry


HOSTILE = [
    (["payload", "operators", 0, "operator"], "x" * (LIMITS.name_chars + 1),
     "plan.operators[0].operator: string of 257 characters is over the limit of 256"),
    (["payload", "operators", 0, "keys", 0], "k" * 100_000,
     "event.payload.operators[0].keys[0]: string of 100000 characters"),
    (["payload", "operators", 0, "keys"], [f"k{i}" for i in range(65)],
     "plan.operators[0].keys: 65 entries is over the limit of 64"),
    (["payload", "operators", 0, "kind"], "<script>alert(1)</script>",
     "plan.operators[0].kind: expected an identifier"),
    (["payload", "operators", 0, "kind"], None, "plan.operators[0].kind: required"),
    (["payload", "operators", 0, "index"], 64, "plan.operators[0].index: 64 is out of range"),
    (["payload", "operators", 0, "index"], "0", "plan.operators[0].index: expected an integer"),
    (["payload", "operators", 0, "num_state_stores"], -1,
     "plan.operators[0].num_state_stores: -1 is out of range"),
    (["payload", "operators", 0, "watermarks"], [{"delay_ms": 5}],
     "plan.operators[0].watermarks[0].column: required"),
    (["payload", "operators"], [{"index": 0, "operator": "x", "kind": "dedupe"}] * 65,
     "plan.operators: 65 entries is over the limit of 64"),
    (["payload", "operators", 0, "num_state_stores"], 2**31,
     "plan.operators[0].num_state_stores: 2147483648 is out of range (0..2147483647)"),
    (["payload", "operators", 0, "operator_id"], 2**31,
     "plan.operators[0].operator_id: 2147483648 is out of range (0..2147483647)"),
    (["payload", "query_id"], "", "plan.query_id: must not be empty"),
    (["payload", "run_id"], "a\nb", "plan.run_id: 'a\\nb' is not an id"),
    (["payload", "run_id"], "r" * 129, "plan.run_id: string of 129 characters"),
    (["payload", "source"], "guess", "plan.source: expected plan or progress"),
    (["payload", "read_at"], -1.0, "plan.read_at: expected epoch seconds"),
    (["payload", "settings"], {"spark.sql.shuffle.partitions": 200},
     "plan.settings.spark.sql.shuffle.partitions: expected a string"),
    (["payload", "operators", 0, "details"], {f"k{i}": i for i in range(257)},
     "plan.operators[0].details: 257 entries is over the limit of 256"),
    (["app", "name"], "", "event.app.name: must not be empty"),
    (["received_at"], "yesterday", "event.received_at: expected epoch seconds"),
    (["payload"], [], "plan: expected a JSON object, got list"),
]


@pytest.mark.parametrize(("path", "value", "expect"), HOSTILE,
                         ids=[".".join(map(str, p)) + f"#{i}" for i, (p, _, _) in
                              enumerate(HOSTILE)])
def test_each_hostile_plan_is_refused_naming_its_field(path: list[Any], value: Any,
                                                       expect: str) -> None:
    got = _verdict(_mutate(path, value))
    assert expect in got, got


@pytest.mark.parametrize(("marker", "expect"), [
    ("__NUL__", "holds a NUL character"),
    ("__SURROGATE__", "lone surrogate"),
    ("__NAN__", "not a finite number"),
])
def test_raw_json_a_plan_cannot_hold_is_refused_naming_its_field(marker: str,
                                                                 expect: str) -> None:
    entry = _mutate(["payload", "operators", 0, "operator"], f"join{marker}")
    if marker == "__NAN__":
        entry = _mutate(["payload", "read_at"], marker)
    got = _verdict(entry, raw=True)
    assert expect in got and ("operator" in got or "read_at" in got), got


def test_a_plan_nested_too_deep_is_refused_naming_its_field() -> None:
    deep: Any = "bottom"
    for _ in range(40):
        deep = {"d": deep}
    got = _verdict(_mutate(["payload", "operators", 0, "details"], deep))
    assert "event.payload.operators[0].details" in got and "nested deeper" in got, got


def test_markup_and_quotes_in_a_plan_are_valid_and_kept_as_they_are() -> None:
    name = '<b onmouseover="x">"quoted"\\ \n</b>'
    entry = _mutate(["payload", "operators", 0, "keys"], [name])
    assert _verdict(entry) == "accepted"
    assert plan_from_wire(entry).plan.operators[0].keys == (name,)


def test_the_listener_fits_what_a_plan_holds_within_the_caps() -> None:
    app, _, plan = _recorded_run("q-1", "r-1")
    op = plan.operators[0]
    long_op = dataclasses.replace(op, keys=tuple("k\x00" * 200 for _ in range(100)),
                                  checkpoint_location="/c" * 10_000)
    big = dataclasses.replace(plan, operators=(long_op,), note="n" * 10_000,
                              settings={f"s{i}": "v" for i in range(300)})
    entry = plan_to_wire(app, big, 1.0)
    assert _verdict(entry) == "accepted"
    fitted = plan_from_wire(entry).plan
    assert len(fitted.operators[0].keys) == 64 and "\x00" not in fitted.operators[0].keys[0]
    assert len(fitted.settings) == LIMITS.map_entries


# --- against a real collector with a PostgreSQL history --------------------------------------


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("plans") / "spool",
                            env={"SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN}) as c:
        yield c


def _identity(text: str, query_id: str) -> dict[str, dict[str, str]]:
    return {labels["operator_index"]: labels
            for labels, _ in samples(text, "spark_streaming_state_operator_info")
            if labels["query_id"] == query_id}


@pytest.mark.postgres
def test_a_pushed_plan_names_operators_in_metrics_history_doctor_and_top(
    collector: Collector,
) -> None:
    query_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    app, wire, plan = _recorded_run(query_id, run_id)
    first_progress = next(i for i, e in enumerate(wire) if e["kind"] == "progress")
    # As the listener sends it: the plan right behind the run's first progress.
    entries = [*wire[:first_progress + 1], plan_to_wire(app, plan, 1795252542.5),
               *wire[first_progress + 1:-1]]  # no terminated: the run stays live in /metrics
    result = collector.post(entries).json()
    assert (result["accepted"], result["rejected"]) == (len(entries), [])

    identity = _identity(collector.metrics(READ_TOKEN), query_id)
    expected = plan.operators[0]
    assert identity["0"]["source"] == "plan"
    assert identity["0"]["kind"] == expected.kind == "stream_stream_join"
    assert identity["0"]["keys"] == ",".join(expected.keys) != ""
    assert identity["0"]["checkpoint_location"] == expected.checkpoint_location

    wait_for(lambda: count_rows(collector.history_url,
                                "select count(*) from operator_plans where run_id = :r",
                                r=run_id) == len(plan.operators), 60, "the plan in the history")
    [served] = collector.get(f"/api/v1/queries/{query_id}/plans", token=READ_TOKEN).json()
    assert served["source"] == "plan" and served["run_id"] == run_id
    assert [op["keys"] for op in served["operators"]] == [list(op.keys) for op in plan.operators]

    doctor = _cli("doctor", "--collector", collector.url, query_id, "--format", "json")
    report = json.loads(doctor.stdout)
    assert [c["plan"] for c in report["checked"]] == ["plan"], report["checked"]
    assert report["findings"], "the recorded run's join keeps state without bounds"
    assert not any("plan was not read" in " ".join(f["evidence"]) for f in report["findings"])
    top = _cli("top", "--collector", collector.url, "--once", "--filter", query_id)
    assert f"{expected.kind} on [{', '.join(expected.keys)}]" in top.stdout, top.stdout


@pytest.mark.postgres
def test_a_plan_of_a_run_its_tenant_never_pushed_is_refused_naming_the_run(
    collector: Collector,
) -> None:
    query_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    app, wire, plan = _recorded_run(query_id, run_id)
    # The history keeps no plan of a run it does not hold: acknowledged, such plans all went to
    # the quarantine, and enough of them filled it and stopped the history of every tenant.
    lone = plan_to_wire(app, plan, 1795252542.5)
    result = collector.post([lone]).json()
    assert result["accepted"] == 0
    assert result["rejected"] == [{"index": 0, "reason": "invalid", "error": (
        f"plan.run_id {run_id!r} names no run or query of this tenant: a plan names the "
        "operators of a run whose events came first")}]
    assert _identity(collector.metrics(READ_TOKEN), query_id) == {}
    other = copy.deepcopy(lone)
    other["payload"]["note"] = "late"
    hostile = json.loads(json.dumps(other))
    hostile["payload"]["operators"][0]["operator"] = "x" * 300
    result = collector.post([hostile]).json()
    assert result["accepted"] == 0
    assert "plan.operators[0].operator" in result["rejected"][0]["error"]



@pytest.mark.postgres
def test_a_restarted_collector_names_a_running_runs_operators_from_its_stored_plan(
    collector: Collector,
) -> None:
    """The listener pushes a run's plan once; the collector reads the plans of the runs still
    running back from the history when it starts, so the next progress is named by the plan."""
    query_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    app, wire, plan = _recorded_run(query_id, run_id)
    progress = [i for i, e in enumerate(wire) if e["kind"] == "progress"]
    before, after = progress[0], progress[1]
    assert collector.post([*wire[:before + 1], plan_to_wire(app, plan, 1795252542.5)]
                          ).json()["accepted"] == before + 2
    wait_for(lambda: count_rows(collector.history_url,
                                "select count(*) from operator_plans where run_id = :r",
                                r=run_id) == len(plan.operators), 60, "the plan in the history")
    restores = collector.log.read_text().count(RESTORED)
    collector.stop()
    collector.start()
    wait_for(lambda: collector.log.read_text().count(RESTORED) > restores, 60,
             "the plans of running runs read back")
    assert _identity(collector.metrics(READ_TOKEN), query_id) == {}, "nothing before its event"
    assert collector.post([wire[after]]).json()["accepted"] == 1
    identity = _identity(collector.metrics(READ_TOKEN), query_id)
    assert identity["0"]["source"] == "plan"
    assert identity["0"]["keys"] == ",".join(plan.operators[0].keys) != ""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"SPARKWATCH_TOKEN": READ_TOKEN, "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-m", "sparkwatch.cli.main", *args],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode in (0, 1), (done.returncode, done.stdout, done.stderr)
    return done
