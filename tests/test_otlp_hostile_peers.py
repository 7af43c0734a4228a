"""The OTLP/HTTP export against peers that are not receivers, with real sockets: one redirecting
the POST, one answering a 2 GB body or an endless chunked one, one dripping its answer. None may
count as an export that worked, grow the driver's memory by what the peer sends, or hold the
export thread past its timeout; each is a failed export, counted and said once.

The SDK's exporter (requests underneath) took any status below 400 for a success, read the whole
answer into memory (4 GB of RSS for a 2 GB answer) and timed each socket read alone (an export of
70 s with a 3 s timeout); :mod:`sparkwatch.otlp.transport` bounds them."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import pytest

from sparkwatch.metrics import profiles
from sparkwatch.metrics.exposition import SparkwatchCollector
from sparkwatch.metrics.state import MetricState
from sparkwatch.otlp.export import OtlpExport
from sparkwatch.otlp.transport import REPLY_LIMIT
from tests.test_exposition import fixture, run_events
from tests.test_otlp import JOIN, config_for

TIMEOUT = 2
"""OTEL_EXPORTER_OTLP_TIMEOUT, seconds: one export's requests and retries."""
FLOOD_MIB = 512
"""What a flooding peer sends at most (MiB): the old exporter read all of it into memory."""


class Peer:
    """A TCP server answering every request with ``answer(conn)`` once the request is read;
    counts the bytes of answer it got out."""

    def __init__(self, answer: Callable[[socket.socket, Peer], None]) -> None:
        self.answer = answer
        self.sent = 0
        self.requests = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn, suppress(OSError):
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            headers, _, body = head.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in headers.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            self.requests += 1
            self.answer(conn, self)

    def send(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)

    def close(self) -> None:
        self._stop.set()
        self._server.close()


@contextmanager
def peer(answer: Callable[[socket.socket, Peer], None]) -> Iterator[Peer]:
    p = Peer(answer)
    try:
        yield p
    finally:
        p.close()


@contextmanager
def exporting(url: str, monkeypatch: pytest.MonkeyPatch,
              results: list[bool]) -> Iterator[OtlpExport]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(TIMEOUT))
    state = MetricState()
    state.apply_all(run_events(fixture(JOIN)))
    collector = SparkwatchCollector(state, selection=profiles.select("default"))
    export = OtlpExport(config_for(url, "http/protobuf", 3_600_000), collector.collect, {},
                        results.append).start()
    try:
        yield export
    finally:
        started = time.monotonic()
        export.stop(timeout=2)
        assert time.monotonic() - started < 2 + 1.5  # its bound: the timeout, then a second


def timed_export(export: OtlpExport) -> tuple[bool, float]:
    started = time.monotonic()
    ok = export.export_now()
    return ok, time.monotonic() - started


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_a_failed_export_not_one_that_worked(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, status: int,
) -> None:
    def moved(conn: socket.socket, p: Peer) -> None:
        p.send(conn, f"HTTP/1.1 {status} Moved\r\nLocation: http://elsewhere.invalid/v1/metrics"
                     "\r\nContent-Length: 0\r\n\r\n".encode())

    results: list[bool] = []
    caplog.set_level(logging.WARNING)
    with peer(moved) as p, exporting(p.url, monkeypatch, results) as export:
        for _ in range(3):
            ok, _took = timed_export(export)
            assert ok is False
    assert results[:3] == [False, False, False] and export.failures >= 3
    ours = [r.getMessage() for r in caplog.records if r.name == "sparkwatch.otlp.export"]
    assert len(ours) == 1 and f"HTTP {status}" in ours[0], ours


def flood(conn: socket.socket, p: Peer) -> None:
    p.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                 b"Content-Length: %d\r\n\r\n" % (2 << 30))
    chunk = b"\0" * (1 << 20)
    for _ in range(FLOOD_MIB):  # of the 2 GB said: enough to show it, not to swap a machine
        p.send(conn, chunk)


def endless_chunks(conn: socket.socket, p: Peer) -> None:
    p.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                 b"Transfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (1 << 20, b"\0" * (1 << 20))
    for _ in range(FLOOD_MIB):  # no end but the peer's patience
        p.send(conn, chunk)


@pytest.mark.parametrize("answer", [flood, endless_chunks], ids=["2-GB-body", "endless-chunked"])
def test_an_endless_answer_is_not_read_into_memory_and_not_a_success(
    monkeypatch: pytest.MonkeyPatch, answer: Callable[[socket.socket, Peer], None],
) -> None:
    results: list[bool] = []
    with peer(answer) as p, exporting(p.url, monkeypatch, results) as export:
        ok, took = timed_export(export)
        assert ok is False, f"read {p.sent} bytes of answer and took it for a success"
        assert took < TIMEOUT + 3
        # What the peer got out: the reply limit and the sockets' buffers, never its 2 GB.
        assert p.sent < REPLY_LIMIT + (64 << 20), p.sent
    assert results[0] is False


def test_an_answer_dripped_a_byte_at_a_time_is_cut_off_at_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done = threading.Event()

    def drip(conn: socket.socket, p: Peer) -> None:
        # 80 bytes, one every 0.15 s: 12 s in all, every read well within a per-read timeout.
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + b"x" * 40:
            p.send(conn, bytes([byte]))
            if done.wait(0.15):
                return

    results: list[bool] = []
    try:
        with peer(drip) as p, exporting(p.url, monkeypatch, results) as export:
            ok, took = timed_export(export)
            assert ok is False
            assert took < TIMEOUT + 3, f"an export of {took:.1f} s with a {TIMEOUT} s timeout"
    finally:
        done.set()


def test_a_receiver_that_answers_well_still_gets_every_export(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bounds cost a real receiver nothing: a small 200 answer, exports that work.
    def fine(conn: socket.socket, p: Peer) -> None:
        p.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                     b"Content-Length: 0\r\n\r\n")

    results: list[bool] = []
    with peer(fine) as p, exporting(p.url, monkeypatch, results) as export:
        assert export.export_now() is True
        assert export.export_now() is True
        assert p.requests >= 2
