"""`top --once` and `doctor --collector` end within their timeout in all, however slowly a
server answers: urllib's timeout holds for each read alone, and a server sending a byte every
now and then kept them waiting for ever. And they read no more than a limit, however much a
server sends: one answering without end filled the command's memory until the timeout."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sparkwatch.cli.main import main
from sparkwatch.doctor import collector_source
from sparkwatch.top import metrics_source
from tests.slow_server import dripping_server, endless_server

TIMEOUT = 1.0
DRIP = 0.2
"""A byte every DRIP seconds: each read waits well under TIMEOUT."""
BOUND = 10.0
"""How long the command may take in all: the deadline plus the time to start and report."""


def ended_within(bound: float, argv: list[str]) -> tuple[int | None, float]:
    """``main(argv)`` in a thread: its exit status (None if still running after ``bound``
    seconds) and how long it took."""
    result: dict[str, Any] = {}
    started = time.monotonic()
    worker = threading.Thread(target=lambda: result.update(code=main(argv)), daemon=True)
    worker.start()
    worker.join(bound)
    return result.get("code"), time.monotonic() - started


def test_top_once_gives_up_on_a_dripping_server_within_its_timeout(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(metrics_source, "TIMEOUT", TIMEOUT)
    with dripping_server(DRIP) as port:
        code, took = ended_within(BOUND, ["top", "--metrics", f"127.0.0.1:{port}", "--once"])
    assert code == 2, f"still running after {took:.1f} s"
    assert took < BOUND
    assert capsys.readouterr().err == (
        f"sparkwatch top: error: cannot read http://127.0.0.1:{port}/metrics: took longer than "
        "1 s in all (a slow or stuck server)\n")


def test_doctor_gives_up_on_a_dripping_collector_within_its_timeout(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(collector_source, "TIMEOUT", TIMEOUT)
    with dripping_server(DRIP) as port:
        code, took = ended_within(BOUND, ["doctor", "--collector", f"http://127.0.0.1:{port}"])
    assert code == 2, f"still running after {took:.1f} s"
    err = capsys.readouterr().err
    assert err == (f"sparkwatch doctor: error: the collector at http://127.0.0.1:{port} took "
                   "longer than 1 s in all (a slow or stuck server)\n")


def test_top_once_stops_reading_an_endless_answer_at_its_limit(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(metrics_source, "LIMIT", 100_000)
    with endless_server() as port:
        code, took = ended_within(BOUND, ["top", "--metrics", f"127.0.0.1:{port}", "--once"])
    assert code == 2, f"still running after {took:.1f} s"
    assert capsys.readouterr().err == (
        f"sparkwatch top: error: cannot read http://127.0.0.1:{port}/metrics: answered with "
        "more than 100000 bytes\n")


def test_doctor_stops_reading_an_endless_answer_at_its_limit(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(collector_source, "LIMIT", 100_000)
    with endless_server() as port:
        code, took = ended_within(BOUND, ["doctor", "--collector", f"http://127.0.0.1:{port}"])
    assert code == 2, f"still running after {took:.1f} s"
    assert capsys.readouterr().err == (
        f"sparkwatch doctor: error: the collector at http://127.0.0.1:{port} answered with "
        "more than 100000 bytes\n")


def test_top_s_limit_holds_the_largest_exposition_a_fleet_serves() -> None:
    # The largest measured (docs/benchmarks.md): 800 MB for 3.4 million series.
    assert metrics_source.LIMIT > 800_000_000
