"""K concurrent HTTP clients sending pre-encoded requests: each lane is one client (one thread, one
keep-alive connection) sending its requests in order, as one driver's push sink does.

Bodies are built before timing, so the clients only write bytes and read small answers; their
CPU is measured (``client_cpu_s``) to show they are not the bottleneck.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

RETRY_FIRST_S = 0.05
RETRY_MAX_S = 2.0
TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Request:
    path: str
    body: bytes
    events: int


@dataclass(frozen=True, slots=True)
class Ack:
    """What one answer says: events accepted, duplicates, refused (by the server's count)."""

    accepted: int
    duplicates: int = 0
    rejected: int = 0


@dataclass(slots=True)
class PushResult:
    events: int = 0
    """events in the requests that were answered with success"""
    requests: int = 0
    body_bytes: int = 0
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    retries: int = 0
    """503 answers (server full), each retried with backoff"""
    statuses: Counter[int] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    started: float = 0.0
    """monotonic time the clients were released"""
    seconds: float = 0.0
    client_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds else 0.0


Parse = Callable[[int, bytes, Request], Ack | None]
"""An answer -> its Ack, or None when the status is a failure (counted, not retried)."""


def collector_ack(status: int, body: bytes, request: Request) -> Ack | None:
    if status != 200:
        return None
    doc = json.loads(body)
    return Ack(doc["accepted"], doc["duplicates"], len(doc["rejected"]))


def pushgateway_ack(status: int, body: bytes, request: Request) -> Ack | None:
    return Ack(request.events) if status in (200, 202) else None


class _Start:
    """Releases every client at once and remembers when."""

    def __init__(self, parties: int, window_s: float | None) -> None:
        self.at = 0.0
        self.window_s = window_s
        self.barrier = threading.Barrier(parties, action=self._mark)

    def _mark(self) -> None:
        self.at = time.monotonic()

    def over(self) -> bool:
        return self.window_s is not None and time.monotonic() - self.at >= self.window_s


class _Lane(threading.Thread):
    def __init__(self, base_url: str, method: str, headers: dict[str, str],
                 requests: Sequence[Request], parse: Parse, start: _Start) -> None:
        super().__init__(name="bench-push", daemon=True)
        self.result = PushResult()
        self._url = urlsplit(base_url)
        self._method, self._headers, self._requests = method, headers, requests
        self._parse, self._start = parse, start

    def run(self) -> None:
        conn = http.client.HTTPConnection(self._url.hostname or "127.0.0.1", self._url.port,
                                          timeout=TIMEOUT_S)
        self._start.barrier.wait()
        try:
            for request in self._requests:
                if self._start.over():
                    return
                self._send(conn, request)
        except Exception as exc:  # noqa: BLE001 - reported with the figures, never swallowed
            self.result.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def _send(self, conn: http.client.HTTPConnection, request: Request) -> None:
        delay = RETRY_FIRST_S
        while True:
            headers = {**self._headers, "Content-Length": str(len(request.body))}
            conn.request(self._method, request.path, body=request.body, headers=headers)
            response = conn.getresponse()
            body = response.read()
            self.result.statuses[response.status] += 1
            if response.status != 503:
                break
            # The server's spool is full: the push sink keeps the batch and retries, so do we.
            self.result.retries += 1
            time.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
        ack = self._parse(response.status, body, request)
        if ack is None:
            self.result.errors.append(f"{request.path}: HTTP {response.status} {body[:300]!r}")
            return
        self.result.requests += 1
        self.result.body_bytes += len(request.body)
        self.result.events += request.events
        self.result.accepted += ack.accepted
        self.result.duplicates += ack.duplicates
        self.result.rejected += ack.rejected


def push_all(base_url: str, method: str, headers: dict[str, str],
             lanes: Sequence[Sequence[Request]], parse: Parse,
             window_s: float | None = None) -> PushResult:
    """Send every lane concurrently (one client each) and add up what came back; with
    ``window_s`` clients stop taking new requests after that many seconds."""
    start = _Start(len(lanes) + 1, window_s)
    threads = [_Lane(base_url, method, headers, lane, parse, start) for lane in lanes]
    for thread in threads:
        thread.start()
    cpu0 = time.process_time()
    start.barrier.wait()
    for thread in threads:
        thread.join()
    total = PushResult(started=start.at, seconds=time.monotonic() - start.at,
                       client_cpu_s=time.process_time() - cpu0)
    for thread in threads:
        r = thread.result
        total.events += r.events
        total.requests += r.requests
        total.body_bytes += r.body_bytes
        total.accepted += r.accepted
        total.duplicates += r.duplicates
        total.rejected += r.rejected
        total.retries += r.retries
        total.statuses.update(r.statuses)
        total.errors += r.errors
    return total
