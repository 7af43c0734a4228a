"""`doctor --collector` against a server that is not a sparkwatch collector: JSON of another
shape, JSON nested past Python's limit, pages that never end. Each is one line naming the
server, exit 2: it traced back (TypeError, IndexError, KeyError, RecursionError), blamed "the
database URL" for a time that was no time, and a server ignoring ``offset`` grew doctor to
8.5 GB before anything stopped it."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

from bench.local import QuietHandler, served
from sparkwatch.cli.main import main
from sparkwatch.doctor import collector_source

QUERY = {"query_id": "q1", "name": "orders"}
RUN = {"run_id": "r1", "query_id": "q1", "name": "orders", "batches": 1}
PROGRESS = {"run_id": "r1", "batch_id": 0, "timestamp": "not a time", "batch_duration_ms": 5,
            "num_input_rows": 1, "event_time_min": None, "event_time_max": None,
            "watermark": None}
ANSWERS: dict[str, object] = {
    "ints": [1, 2, 3],
    "null": None,
    "object": {},
    "no-field": [{"name": "orders"}],
}
ROUTED = {"no-time": {"/api/v1/queries": [QUERY], "/runs": [RUN], "/progress": [PROGRESS]}}
"""Answers by the path's end."""


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """Answers GET /<answer>/api/v1/... with ANSWERS[answer] or by ROUTED[answer]; /deep with
    JSON nested 100,000 deep; /same with the same full page for every offset; /endless with a
    new full page for every offset."""
    counter = itertools.count()

    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            name, _, rest = self.path.lstrip("/").partition("/")
            path = "/" + rest.split("?")[0]
            if name == "deep":
                body = b"[" * 100_000
            elif name in ("same", "endless"):
                n = 0 if name == "same" else next(counter)
                body = json.dumps([{"query_id": f"q{n}-{i}"} for i in range(1000)]).encode()
            elif name in ROUTED:
                routes = ROUTED[name].items()
                body = json.dumps(next((v for k, v in routes if path.endswith(k)), [])).encode()
            else:
                body = json.dumps(ANSWERS[name]).encode()
            self.answer(200, body)

    with served(Handler) as url:
        yield url


def doctor(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["doctor", "--collector", *args])
    captured = capsys.readouterr()
    assert captured.out == ""
    return code, captured.err


@pytest.mark.parametrize(("answer", "why"), [
    ("ints", "a value of another type"),
    ("null", "/api/v1/queries answered no list"),
    ("object", "/api/v1/queries answered no list"),
    ("no-field", "an item without a field it always has"),
    ("no-time", "a time or number that is none"),
    ("same", "/api/v1/queries answered the same page at offset 1000"),
])
def test_an_answer_of_another_shape_is_named_in_one_line(
        server: str, capsys: pytest.CaptureFixture[str], answer: str, why: str) -> None:
    assert doctor(capsys, f"{server}/{answer}") == (2, (
        f"sparkwatch doctor: error: the collector at {server}/{answer} answered what its read "
        f"API never does ({why}): is it a sparkwatch collector?\n"))


def test_a_named_query_without_runs_or_of_another_shape_is_named_in_one_line(
        server: str, capsys: pytest.CaptureFixture[str]) -> None:
    for answer in ("object", "no-field"):
        code, err = doctor(capsys, f"{server}/{answer}", "orders")
        assert (code, err.endswith("is it a sparkwatch collector?\n")) == (2, True), err
    code, err = doctor(capsys, f"{server}/null", "orders")  # null[0]
    assert code == 2 and "(a value of another type)" in err, err


def test_json_nested_past_python_s_limit_is_not_json_to_doctor(
        server: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert doctor(capsys, f"{server}/deep") == (
        2, f"sparkwatch doctor: error: the collector at {server}/deep answered something other "
           "than JSON\n")


def test_pages_without_end_stop_at_the_most_a_listing_takes(
        server: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector_source, "MAX_PAGES", 3)
    code, err = doctor(capsys, f"{server}/endless")
    assert (code, err) == (2, (
        f"sparkwatch doctor: error: the collector at {server}/endless answered what its read "
        "API never does (/api/v1/queries answered more than 3 full pages): is it a sparkwatch "
        "collector?\n"))
