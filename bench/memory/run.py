"""The phases of ``python -m bench memory`` against a real collector: idle, then requests at the
body limit (one identity, one gzip, N at once), the resident memory of the collector and its
history writer process sampled from /proc throughout, until the history holds what was sent."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.fleet import Fleet
from bench.ingest.collector import Running
from bench.procs import ProcessFailed, descendants, wait_until

SAMPLE_S = 0.005
IDLE_SAMPLES = 20
DRAIN_TIMEOUT_S = 600.0
REQUEST_TIMEOUT_S = 300.0
GZIP_LEVEL = 5  # the push sink's
WARM_UP_BATCH = 100


@dataclass(frozen=True, slots=True)
class Body:
    data: bytes
    events: int
    raw_bytes: int
    """the JSON's size before gzip (what the limit bounds)"""
    encoding: str


@dataclass(slots=True)
class Phase:
    name: str
    requests: int
    body_bytes: int
    """the JSON of one request, before gzip"""
    encoding: str
    statuses: dict[str, int] = field(default_factory=dict)
    peak_collector_mib: float = 0.0
    peak_total_mib: float = 0.0
    """collector + history writer process, sampled together"""
    peak_writer_mib: float = 0.0
    """the history writer process alone"""
    idle_collector_mib: float = 0.0
    idle_writer_mib: float = 0.0
    idle_total_mib: float = 0.0
    """the phase's own collector (and its writer), warmed up and quiet, before its requests"""
    seconds: float = 0.0


def bodies(fleet: Fleet, limit: int, count: int, start: int, encoding: str) -> list[Body]:
    """``count`` requests of new events (none a duplicate), each as close under ``limit`` as
    whole events allow."""
    template = fleet.template()
    one = len(json.dumps(fleet.envelope(template, 0), separators=(",", ":"))) + 1
    per = max(1, limit // one)
    out = []
    for k in range(count):
        first = start + k * per
        envelopes = [fleet.envelope(template, i) for i in range(first, first + per)]
        raw = json.dumps({"events": envelopes}, separators=(",", ":")).encode()
        while len(raw) > limit:
            envelopes.pop()
            raw = json.dumps({"events": envelopes}, separators=(",", ":")).encode()
        data = gzip.compress(raw, GZIP_LEVEL) if encoding == "gzip" else raw
        out.append(Body(data, len(envelopes), len(raw), encoding))
    return out


def warm_up(running: Running, fleet: Fleet) -> None:
    """One event of every query, in small requests: /metrics then holds every series the
    measured requests touch, so that what they cost over idle is the requests' alone."""
    template = fleet.template()
    for first in range(0, fleet.queries, WARM_UP_BATCH):
        envelopes = [fleet.envelope(template, i)
                     for i in range(first, min(first + WARM_UP_BATCH, fleet.queries))]
        raw = json.dumps({"events": envelopes}, separators=(",", ":")).encode()
        status = post(running, Body(gzip.compress(raw, GZIP_LEVEL), len(envelopes), len(raw),
                                    "gzip"))
        if status != 200:
            raise ProcessFailed(f"the warm-up request was answered {status}")
    wait_until(drained(running), DRAIN_TIMEOUT_S, "the warm-up in the history")


def events_per_body(fleet: Fleet, limit: int) -> int:
    return bodies(fleet, limit, 1, 0, "identity")[0].events


class RssSampler:
    """Polls VmRSS of the collector and its children; keeps the peaks."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._stop = threading.Event()
        self.peak_collector = self.peak_writer = self.peak_total = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            own, total = rss_mib(self._pid)
            self.peak_collector = max(self.peak_collector, own)
            self.peak_writer = max(self.peak_writer, total - own)
            self.peak_total = max(self.peak_total, total)
            self._stop.wait(SAMPLE_S)


def rss_mib(pid: int) -> tuple[float, float]:
    """(the collector's VmRSS, with its children's) in MiB, now."""
    own = _rss_kib(pid)
    children = sum(_rss_kib(child) for child in descendants(pid))
    return own / 1024, (own + children) / 1024


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:  # ended meanwhile
        pass
    return 0


def idle(running: Running) -> tuple[float, float]:
    """Median RSS (collector, with children) over a short quiet window."""
    samples = []
    for _ in range(IDLE_SAMPLES):
        samples.append(rss_mib(running.pid))
        time.sleep(0.02)
    samples.sort(key=lambda s: s[1])
    return samples[len(samples) // 2]


def drained(running: Running) -> Callable[[], bool]:
    """The spool is empty: the history holds every accepted event. (Asked of /readyz: a scrape
    of /metrics would cost memory of its own.)"""
    def check() -> bool:
        running.alive()
        ready = httpx.get(running.url + "/readyz", timeout=60).json()
        return bool(ready["spool"]["pending_bytes"] == 0)

    return check


def post(running: Running, body: Body) -> int:
    headers = {"Authorization": f"Bearer {running.token}", "Content-Type": "application/json"}
    if body.encoding == "gzip":
        headers["Content-Encoding"] = "gzip"
    response = httpx.post(running.url + "/api/v1/events", content=body.data, headers=headers,
                          timeout=REQUEST_TIMEOUT_S)
    return response.status_code


def run_phase(running: Running, name: str, batch: list[Body]) -> Phase:
    """Send ``batch`` at once (one thread each), sampling RSS until the history holds what was
    accepted."""
    phase = Phase(name, len(batch), batch[0].raw_bytes, batch[0].encoding)
    phase.idle_collector_mib, phase.idle_total_mib = idle(running)
    phase.idle_writer_mib = phase.idle_total_mib - phase.idle_collector_mib
    statuses: Counter[int] = Counter()
    accepted = [0]
    lock = threading.Lock()

    def send(body: Body) -> None:
        status = post(running, body)
        with lock:
            statuses[status] += 1
            if status == 200:
                accepted[0] += body.events

    started = time.monotonic()
    with RssSampler(running.pid) as sampler:
        threads = [threading.Thread(target=send, args=(b,)) for b in batch]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wait_until(drained(running), DRAIN_TIMEOUT_S,
                   f"{accepted[0]} events of phase {name!r} in the history")
    phase.seconds = time.monotonic() - started
    phase.statuses = {str(k): v for k, v in sorted(statuses.items())}
    phase.peak_collector_mib = sampler.peak_collector
    phase.peak_total_mib = sampler.peak_total
    phase.peak_writer_mib = sampler.peak_writer
    return phase
