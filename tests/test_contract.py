"""The validation contract: every hostile input is refused on its own, naming the field, and the
rest of the request, and every other app, goes on being served, stored and rendered."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sparkwatch.collector.body import BodyError, events_of
from sparkwatch.collector.fastjson import encode
from sparkwatch.collector.ingest import _checked, _cleared, canonical_event, check_events
from sparkwatch.collector.typedwire import typed_body
from sparkwatch.model.contract import (
    LIMITS,
    ContractViolation,
    canonical_is_clean,
    check_tree,
    envelope_schema,
)
from sparkwatch.model.parse import envelope_to_dict
from tests.hostile import Case, body_cases, body_of, one_event_cases, progress_event
from tests.support import wait_for
from tests.test_collector_support import (
    READ_TOKEN,
    Collector,
    count_rows,
    database_collector,
    fresh_ids,
    run_events,
    samples,
)


def _event(i: int) -> dict[str, Any]:
    return progress_event(str(uuid.uuid4()), str(uuid.uuid4()), i)


CASES = one_event_cases(_event) + body_cases(_event)


def verdict(body: bytes) -> str:
    """What the collector's ingest makes of a one-event body, in process."""
    try:
        items, strict = events_of(body, 5000)
        [result] = check_events(items, body if strict else None)
    except BodyError as exc:
        assert 400 <= exc.status < 500
        return "body 4xx"
    return str(result) if isinstance(result, ContractViolation) else "accepted"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_each_hostile_input_is_refused_naming_its_field(case: Case) -> None:
    got = verdict(case.body)
    if case.expect in ("body 4xx", "accepted"):
        assert got == case.expect
    else:
        assert case.expect in got, got


COMPACT = one_event_cases(_event, compact=True)


def typed_verdict(body: bytes) -> str:
    """What the ingest route makes of a one-event body: read typed when the structs vouch for it
    (a canonical body, as the push sink writes), else the exact way."""
    return "accepted" if typed_body(body, 5000, canonical_event) is not None else verdict(body)


@pytest.mark.parametrize("case", COMPACT, ids=[c.name for c in COMPACT])
def test_each_hostile_input_is_refused_alike_on_the_typed_way_in(case: Case) -> None:
    got = typed_verdict(case.body)
    if case.expect == "accepted":
        assert got == case.expect
    else:
        assert case.expect in got, got


def test_a_real_progress_body_is_cleared_whole_by_the_canonical_check() -> None:
    body = body_of([_event(0), _event(1)]).replace(b", ", b",").replace(b": ", b":")
    items, strict = events_of(body, 5000)
    cleared = _cleared(items, body)
    assert strict and cleared is not None
    assert [parsed.event.batch_id for parsed, _ in cleared] == [0, 1]


def test_the_exact_path_accepts_what_the_fast_path_accepts() -> None:
    body = body_of([_event(0)])  # spaced, as json.dumps writes: not canonical
    compact = body.replace(b", ", b",").replace(b": ", b":")
    assert _cleared(events_of(body, 5000)[0], body) is None
    [(slow, not_kept)] = check_events(events_of(body, 5000)[0], body)
    [(fast, encoded)] = check_events(events_of(compact, 5000)[0], compact)
    assert slow == fast and not_kept is None  # encoded again when spooled, not held meanwhile
    assert encode(envelope_to_dict(slow.envelope)) == encoded


def test_a_string_holding_a_quote_and_colon_is_read_as_it_is() -> None:
    event = _event(0)
    event["payload"]["name"] = 'a": b'
    [(parsed, _)] = check_events([event], None)
    assert parsed.event.name == 'a": b'


def test_duplicate_keys_are_never_cleared_by_the_canonical_check() -> None:
    assert not canonical_is_clean(b'{"a":1,"a":2}', b'{"a":2}')
    assert canonical_is_clean(b'{"a":1,"b":2}', b'{"a":1,"b":2}')


def test_nul_and_integer_literals_too_long_for_64_bits_are_never_cleared() -> None:
    assert not canonical_is_clean(b'{"a":12345678901234567890}', b'{"a":12345678901234567890}')
    assert not canonical_is_clean(b'{"a":"\\u0000"}', b'{"a":"\\u0000"}')
    assert canonical_is_clean(b'{"a":123456789012345678}', b'{"a":123456789012345678}')


def test_nan_rates_mean_unknown_as_in_spark_and_are_stored_as_null() -> None:
    event = _event(0)
    event["payload"]["inputRowsPerSecond"] = "__NAN__"
    [(parsed, _)] = check_events(events_of(body_of([event]), 5000)[0], None)
    encoded = encode(envelope_to_dict(parsed.envelope))
    assert parsed.event.input_rows_per_second is None
    assert b'"inputRowsPerSecond":null' in encoded


def test_an_event_over_the_size_limit_is_refused_alone() -> None:
    event = _event(0)
    event["payload"]["futureField"] = ["x" * 4000] * (LIMITS.event_bytes // 4000 + 1)
    with pytest.raises(ContractViolation, match="event: .* bytes encoded is over the limit"):
        _checked(event, True)


def test_tree_paths_name_the_position_of_the_value() -> None:
    with pytest.raises(ContractViolation, match=r"^sources\[0\]\.endOffset\.t\.0: "):
        check_tree({"sources": [{"endOffset": {"t": {"0": 2**64}}}]}, "")


# --- against a real collector with a PostgreSQL history --------------------------------------


@pytest.fixture(scope="module")
def collector(pg_admin_url: str, tmp_path_factory: Any) -> Iterator[Collector]:
    with database_collector(pg_admin_url, tmp_path_factory.mktemp("contract") / "spool",
                            "--max-body-bytes", str(4 << 20),
                            env={"SPARKWATCH_COLLECTOR_READ_TOKEN": READ_TOKEN}) as c:
        yield c


def _post_raw(collector: Collector, body: bytes) -> httpx.Response:
    from tests.test_collector_support import TOKEN

    return httpx.post(collector.ingest_url, content=body, timeout=30, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"})


@pytest.mark.postgres
def test_hostile_corpus_leaves_another_app_fully_served(
    collector: Collector, promtool: str
) -> None:
    ids = fresh_ids()
    app_b = {"name": "app-b", "id": "app-b-0001", "spark_version": "4.3.0"}
    good = run_events("window_agg_rocksdb", app=app_b, **ids)
    statuses = []
    for i, case in enumerate(CASES):
        response = _post_raw(collector, case.body)
        statuses.append(response.status_code)
        _assert_outcome(case, response)
        if i < len(good):  # app B pushes its real run between the hostile requests
            assert collector.post([good[i]]).json()["accepted"] == 1
    for event in good[len(CASES):]:
        assert collector.post([event]).json()["accepted"] == 1
    assert max(statuses) < 500, statuses
    batches = sum(1 for e in good if e["kind"] == "progress")
    wait_for(lambda: count_rows(collector.history_url,
                                "select count(*) from batches where run_id = :r",
                                r=ids["run_id"]) == batches, 60, "app B's batches in the history")
    text = collector.metrics(READ_TOKEN)
    assert [v for labels, v in samples(text, "spark_streaming_query_batches_total")
            if labels["query_id"] == ids["query_id"]] == [batches]
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
    assert (check.returncode, check.stdout, check.stderr) == (0, "", "")
    _assert_accepted_are_stored_and_shown(collector, [c for c in CASES if c.expect == "accepted"])


def _assert_accepted_are_stored_and_shown(collector: Collector, accepted: list[Case]) -> None:
    """What was accepted is in the history (none of it quarantined) and every page and read of
    its query answers 200."""
    runs = {}
    for case in accepted:
        [event] = json.loads(case.body)["events"]
        runs[event["payload"]["runId"]] = event["payload"]["id"]
    wait_for(lambda: sum(count_rows(collector.history_url, "select count(*) from batches "
                                    "where run_id = :r", r=run) for run in runs) == len(runs),
             60, "every accepted hostile batch in the history")
    assert [v for _, v in samples(collector.metrics(READ_TOKEN),
                                  "sparkwatch_collector_events_quarantined_total")] in ([], [0.0])
    for query_id in runs.values():
        for path in (f"/queries/{query_id}", f"/api/v1/queries/{query_id}/progress",
                     f"/api/v1/queries/{query_id}/state", f"/api/v1/queries/{query_id}/runs"):
            response = collector.get(path, READ_TOKEN)
            assert response.status_code == 200, (path, response.text[-2000:])


def _assert_outcome(case: Case, response: httpx.Response) -> None:
    if case.expect == "body 4xx":
        assert 400 <= response.status_code < 500, (case.name, response.text)
        return
    assert response.status_code == 200, (case.name, response.text)
    result = response.json()
    if case.expect == "accepted":
        assert (result["accepted"], result["rejected"]) == (1, []), (case.name, result)
    else:
        assert result["accepted"] == 0, (case.name, result)
        [rejected] = result["rejected"]
        assert rejected["reason"] == "invalid" and case.expect in rejected["error"], \
            (case.name, rejected)


# --- the listener: Spark's own values made to fit, so the driver never exports a refusal -----


def _listener(payload: dict[str, Any]) -> Any:
    from sparkwatch.model.events import AppInfo, EventKind
    from sparkwatch.model.parse import listener_event

    raw = json.dumps({"progress": payload})  # as PySpark writes it (NaN literals and all)
    return listener_event(EventKind.PROGRESS, raw, AppInfo("a" * 300, "app-1", "4.3.0"), 1.0)


def test_the_listener_fits_names_and_descriptions_spark_made_too_long() -> None:
    payload = _event(0)["payload"]
    payload["name"] = "q" * 300
    payload["sources"][0]["description"] = "d" * 10_000
    parsed = _listener(payload)
    assert parsed.event.name == "q" * 255 + "\u2026"
    assert parsed.app.name == "a" * 255 + "\u2026"
    assert len(parsed.event.sources[0].description) == LIMITS.text_chars
    _checked(_wire_item(parsed), False)  # what the collector makes of the export: accepted


def test_the_listener_reads_nan_rates_as_unknown_and_exports_null() -> None:
    payload = _event(0)["payload"]
    payload["inputRowsPerSecond"] = float("nan")
    payload["sources"][0]["processedRowsPerSecond"] = float("inf")
    parsed = _listener(payload)
    assert parsed.event.input_rows_per_second is None
    assert parsed.event.sources[0].processed_rows_per_second is None
    assert _wire_item(parsed)["payload"]["inputRowsPerSecond"] is None


def test_the_listener_keeps_a_batch_whose_clock_stepped_back_with_rates_unknown() -> None:
    """Spark times triggers by the driver's wall clock (SystemClock): when it steps back, the
    input rate (rows over the time since the last trigger started) and batchDuration (end minus
    start) come out negative. The rates are unknown, as NaN ones; the batch lasted what
    triggerExecution measured (Spark holds each phase at 0 or more)."""
    payload = _event(0)["payload"]
    payload.update(inputRowsPerSecond=-12.5, batchDuration=-40)
    payload["sources"][0]["inputRowsPerSecond"] = -12.5
    parsed = _listener(payload)
    assert parsed.event.input_rows_per_second is None
    assert parsed.event.sources[0].input_rows_per_second is None
    assert parsed.event.processed_rows_per_second == payload["processedRowsPerSecond"]
    assert parsed.event.batch_duration_ms == payload["durationMs"]["triggerExecution"] == 563
    wire = _wire_item(parsed)
    assert wire["payload"]["inputRowsPerSecond"] is None
    _checked(wire, False)  # what the collector makes of the export: accepted


def test_the_published_schema_states_that_rates_are_never_negative() -> None:
    progress = envelope_schema()["properties"]["payload"]["properties"]
    source = progress["sources"]["items"]["properties"]
    assert [schema["minimum"] for schema in (
        progress["inputRowsPerSecond"], progress["processedRowsPerSecond"],
        source["inputRowsPerSecond"], source["processedRowsPerSecond"])] == [0, 0, 0, 0]
    assert progress["batchDuration"]["minimum"] == source["numInputRows"]["minimum"] == 0


def test_the_listener_replaces_nul_and_lone_surrogates_in_free_text() -> None:
    payload = _event(0)["payload"]
    payload["observedMetrics"] = {"o": {"text": "a\x00b\ud800c"}}
    parsed = _listener(payload)
    assert parsed.event.observed_metrics["o"]["text"] == "a\ufffdb\ufffdc"
    _checked(_wire_item(parsed), False)


def test_the_listener_fits_a_python_sources_offset_the_collector_would_refuse() -> None:
    """A Python data source's offsets are the user's JSON, and Spark writes them as they are:
    what nests too deep is dropped, as in observed rows, and the export is accepted."""
    payload = _event(0)["payload"]
    deep: Any = 0
    for _ in range(40):
        deep = {"d": deep}
    payload["sources"][0]["endOffset"] = deep
    parsed = _listener(payload)
    kept, levels = parsed.event.sources[0].end_offset, 0
    while isinstance(kept, dict) and kept:
        kept, levels = kept["d"], levels + 1
    assert levels == LIMITS.depth - 4  # envelope, payload, sources and the source itself
    _checked(_wire_item(parsed), False)


def _wire_item(parsed: Any) -> dict[str, Any]:
    from sparkwatch.model.parse import envelope_to_dict

    return json.loads(json.dumps(envelope_to_dict(parsed.envelope)))


@pytest.mark.postgres
def test_the_published_openapi_states_the_contracts_own_limits(collector: Collector) -> None:
    spec = collector.get("/openapi.json").json()
    body = spec["paths"]["/api/v1/events"]["post"]["requestBody"]["content"]["application/json"]
    event = body["schema"]["properties"]["events"]["items"]["anyOf"][0]
    assert event["properties"]["app"]["properties"]["name"]["maxLength"] == LIMITS.name_chars
    operator = event["properties"]["payload"]["properties"]["stateOperators"]
    assert operator["maxItems"] == LIMITS.operators
    # (FastAPI serves integers this large as floats)
    assert operator["items"]["properties"]["numRowsTotal"]["maximum"] == float(2**63 - 1)


def test_the_documented_limits_are_the_contracts() -> None:
    import dataclasses
    import re
    from pathlib import Path

    doc = (Path(__file__).parent.parent / "docs" / "reliability.md").read_text()
    table = doc.split("<!-- limits-table:start -->")[1].split("<!-- limits-table:end -->")[0]
    documented = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|", table, re.M))
    assert documented == {f.name: str(getattr(LIMITS, f.name))
                          for f in dataclasses.fields(LIMITS)}


def test_what_the_listener_pushes_is_cleared_by_the_canonical_check() -> None:
    from sparkwatch.model.parse import envelope_to_dict

    events = [envelope_to_dict(_listener(_event(i)["payload"]).envelope) for i in range(3)]
    body = json.dumps({"events": events}, separators=(",", ":"), ensure_ascii=False).encode()
    assert _cleared(events_of(body, 10)[0], body) is not None
