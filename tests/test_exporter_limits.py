"""The driver's /metrics and console port as a hostile client sees it, with real sockets: it runs
inside the monitored app, so a silent or trickling client is closed at the request deadline,
connections past the cap are answered 503 without a thread each, stopping the server closes every
connection it holds, and HEAD is answered as GET without the body."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge

from sparkwatch.console.app import Console
from sparkwatch.listener.exporter import MetricsServer, serve_metrics
from sparkwatch.metrics.state import MetricState
from tests.support import closed_within, wait_for

DEADLINE = 0.5
"""The request deadline the tests give the server (the real one is 10 s)."""

SILENT = b"GET /metrics HTTP/1.1\r\nX-a: "
"""A request that never ends: the head of a slow-loris client."""


def _serve(request_timeout: float = DEADLINE, max_connections: int = 64) -> MetricsServer:
    registry = CollectorRegistry()
    Gauge("limits_test_gauge", "a gauge", registry=registry).set(7)
    console = Console(None, lambda _tenant: [MetricState()])
    return serve_metrics(registry, "127.0.0.1", 0, console, request_timeout=request_timeout,
                         max_connections=max_connections)


@pytest.fixture()
def server() -> Iterator[MetricsServer]:
    s = _serve()
    yield s
    s.stop()


def _connect(server: MetricsServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=5)


def _exchange(server: MetricsServer, request: bytes,
              timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and body of one request, read to the server's close."""
    with _connect(server) as sock:
        sock.settimeout(timeout)
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.strip().lower(): value.strip()
               for name, _, value in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _scrape(server: MetricsServer, timeout: float = 5) -> int:
    return _exchange(server, b"GET /metrics HTTP/1.0\r\n\r\n", timeout)[0]


def _handler_threads() -> int:
    return sum(1 for t in threading.enumerate() if "process_request_thread" in t.name)


def test_a_silent_connection_is_closed_by_the_driver_within_the_request_deadline(
        server: MetricsServer) -> None:
    with _connect(server) as sock:
        sock.sendall(SILENT)
        assert _scrape(server) == 200  # served meanwhile
        took = closed_within(sock, DEADLINE + 5, every=0.05)
    assert DEADLINE * 0.8 <= took < DEADLINE + 2, took


def test_headers_trickled_a_byte_at_a_time_are_cut_off_at_the_deadline(
        server: MetricsServer) -> None:
    # Each byte comes well within any per-read timeout: only a deadline on the whole request
    # ends it.
    trickle = b"GET /metrics HTTP/1.1\r\nX-Padding: " + b"a" * 400
    with _connect(server) as sock:
        took = closed_within(sock, DEADLINE + 5, trickle=trickle, every=0.05)
    assert took < DEADLINE + 2, took
    assert _scrape(server) == 200


def _held(sock: socket.socket) -> bool:
    """Whether the server still holds ``sock`` open: nothing to read, no end of it."""
    sock.settimeout(0.2)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True
    except OSError:
        return False


def test_a_scrape_past_the_cap_of_silent_connections_takes_the_oldests_place() -> None:
    """64 silent clients kept every scrape out (503) until the deadline freed a slot; a scrape
    sends its request at once, so the oldest connection still without one makes room."""
    capped = _serve(request_timeout=30, max_connections=3)  # the test ends them, not the deadline
    threads_before = _handler_threads()
    idle: list[socket.socket] = []
    try:
        for n in range(1, 4):  # one by one: the server takes them in this order
            idle.append(_connect(capped))
            idle[-1].sendall(SILENT)
            wait_for(lambda n=n: _handler_threads() >= threads_before + n, 5, f"{n} held")
        assert _scrape(capped) == 200
        assert closed_within(idle[0], 5, every=0.05) < 5
        assert all(_held(sock) for sock in idle[1:])
    finally:
        for sock in idle:
            sock.close()
        capped.stop()


def test_a_flood_of_silent_connections_never_holds_more_than_the_cap() -> None:
    capped = _serve(request_timeout=30, max_connections=3)
    threads_before = _handler_threads()
    flood = [_connect(capped) for _ in range(50)]
    try:
        # Each takes the place of the oldest: all but the last three are closed at once.
        for sock in flood[:-3]:
            assert closed_within(sock, 5, every=0.05) < 5
        wait_for(lambda: _handler_threads() <= threads_before + 3, 5, "threads within the cap")
        assert _scrape(capped) == 200
    finally:
        for sock in flood:
            sock.close()
        capped.stop()


def test_connections_past_the_cap_of_answers_in_progress_get_503_at_once() -> None:
    """Connections being answered are never closed to make room: one more is answered 503
    from the accepting thread, no thread of its own, and a scrape succeeds once they end."""
    capped = serve_metrics(_big_registry(100_000), "127.0.0.1", 0, request_timeout=30,
                           max_connections=3)
    threads_before = _handler_threads()
    busy: list[socket.socket] = []
    try:
        for _ in range(3):
            sock = _connect(capped)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            busy.append(sock)
        for sock in busy:  # its answer has begun: read, not one to make room with
            sock.settimeout(30)
            assert sock.recv(12) == b"HTTP/1.0 200"
        status, headers, body = _exchange(capped, b"GET /metrics HTTP/1.0\r\n\r\n")
        assert status == 503 and b"at most 3 at once" in body
        assert headers["content-length"] == str(len(body))
        flood = [_connect(capped) for _ in range(50)]
        try:
            for sock in flood:
                assert closed_within(sock, 5, every=0.05) < 5
        finally:
            for sock in flood:
                sock.close()
        assert _handler_threads() <= threads_before + 3
    finally:
        for sock in busy:
            sock.close()
    try:
        # 100,000 series take seconds to render on two busy cores: one scrape may wait for it.
        wait_for(lambda: _scrape(capped, timeout=30) == 200, 60,
                 "a scrape served once the answers ended", every=0.5)
    finally:
        capped.stop()


def test_stopping_the_server_closes_every_connection_it_holds() -> None:
    held_server = _serve(request_timeout=30)
    threads_before = _handler_threads()
    held = [_connect(held_server) for _ in range(5)]
    try:
        for sock in held:
            sock.sendall(SILENT)
        # A thread each: all five accepted and waiting on their clients (none in the backlog).
        wait_for(lambda: _handler_threads() >= threads_before + 5, 10, "all five connections held")
        start = time.monotonic()
        held_server.stop()
        assert time.monotonic() - start < 1
        for sock in held:
            assert closed_within(sock, 5, every=0.05) < 1
        wait_for(lambda: _handler_threads() <= threads_before, 5, "the handler threads ended")
    finally:
        held_server.stop()
        for sock in held:
            sock.close()


@pytest.mark.parametrize("path", ["/metrics", "/", "/console.js"])
def test_head_answers_as_get_with_its_status_and_headers_and_no_body(
        server: MetricsServer, path: str) -> None:
    got_status, got_headers, got_body = _exchange(server, f"GET {path} HTTP/1.0\r\n\r\n".encode())
    status, headers, body = _exchange(server, f"HEAD {path} HTTP/1.0\r\n\r\n".encode())
    assert got_status == status == 200
    assert got_body and body == b""
    assert headers["content-type"] == got_headers["content-type"]
    assert headers["content-length"] == got_headers["content-length"] == str(len(got_body))


def test_the_metrics_path_names_head_among_its_allowed_methods(server: MetricsServer) -> None:
    status, headers, _ = _exchange(server, b"OPTIONS /metrics HTTP/1.0\r\n\r\n")
    assert status == 200
    assert "HEAD" in headers["allow"].split(",")


def _big_registry(series: int) -> CollectorRegistry:
    """An exposition of several megabytes: more than a socket's buffers take unread."""
    registry = CollectorRegistry()
    gauge = Gauge("limits_test_wide", "a wide gauge", ["name"], registry=registry)
    for i in range(series):
        gauge.labels(f"query-{i:06d}-{'x' * 40}").set(i)
    return registry


def test_a_client_too_slow_to_take_the_answer_is_dropped_without_a_traceback_on_stderr(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The port runs inside the monitored app: a scraper that stops reading mid-answer costs a
    debug line, not a traceback in the app's own stderr."""
    server = serve_metrics(_big_registry(100_000), "127.0.0.1", 0, request_timeout=DEADLINE)
    try:
        with _connect(server) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            # Never read: the answer's write times out and the driver lets the connection go.
            assert server.server.wait_connections_closed(DEADLINE + 20)
    finally:
        server.stop()
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_page_that_fails_is_answered_500_and_logged_once_by_the_sparkwatch_logger(
    capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A failing page is ours to report, in the app's log through logging, not as a raw
    traceback the standard library's server prints."""

    class Failing:
        def collect(self) -> list[object]:
            raise RuntimeError("a collector that fails")

    registry = CollectorRegistry()
    registry.register(Failing())  # type: ignore[arg-type]
    server = serve_metrics(registry, "127.0.0.1", 0, request_timeout=DEADLINE)
    try:
        status, _, _ = _exchange(server, b"GET /metrics HTTP/1.0\r\n\r\n")
    finally:
        server.stop()
    assert status == 500
    captured = capfd.readouterr()
    assert "Traceback" not in captured.err + captured.out
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(failures) == 1 and "/metrics" in failures[0].getMessage()
    exc_info = failures[0].exc_info
    assert exc_info is not None and "a collector that fails" in str(exc_info[1])
