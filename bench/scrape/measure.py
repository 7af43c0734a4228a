"""Scraping a ``/metrics`` endpoint the way Prometheus does, and counting what it serves.

Latency is one sequential GET from sending the request to its last byte on the wire (raw bytes,
not decompressed: decompressing is the scraper's cost, not the server's).
"""

from __future__ import annotations

import gzip
import time
from dataclasses import dataclass

import httpx

from bench.timing import percentile

ENCODINGS = ("identity", "gzip")
SCRAPE_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Latency:
    n: int
    p50_ms: float
    p95_ms: float
    max_ms: float

    @staticmethod
    def of(seconds: list[float]) -> Latency:
        ms = sorted(s * 1000.0 for s in seconds)
        return Latency(len(ms), percentile(ms, 50), percentile(ms, 95), ms[-1])


@dataclass(frozen=True, slots=True)
class Census:
    """What a text exposition holds (a series is a sample line)."""

    series: int
    families: int
    spark_streaming: int
    queries: int
    """``spark_streaming_query_info`` series: one per query"""
    sparkwatch_collector: int
    push_time: int
    push_failure_time: int

    @staticmethod
    def of(body: bytes) -> Census:
        comments = body.count(b"\n#") + body.startswith(b"#")
        lines = body.count(b"\n") + (0 if body.endswith(b"\n") or not body else 1)

        def starting(prefix: bytes) -> int:
            return body.count(b"\n" + prefix) + body.startswith(prefix)

        return Census(
            series=lines - comments, families=starting(b"# TYPE "),
            spark_streaming=starting(b"spark_streaming_"),
            queries=starting(b"spark_streaming_query_info{"),
            sparkwatch_collector=starting(b"sparkwatch_collector_"),
            push_time=starting(b"push_time_seconds{"),
            push_failure_time=starting(b"push_failure_time_seconds{"),
        )


@dataclass(frozen=True, slots=True)
class Scraped:
    """One encoding's scrapes of one server."""

    encoding: str
    """Accept-Encoding of the request."""
    served: str
    """Content-Encoding of the answers (a server may ignore ``gzip``)."""
    latency: Latency
    wire_bytes: int
    """Bytes on the wire of the last scrape (the gzipped size when served gzipped)."""


@dataclass(frozen=True, slots=True)
class Answer:
    seconds: float
    """From sending the request to its last raw byte."""
    raw: bytes
    encoding: str


def scrape(client: httpx.Client, url: str, encoding: str) -> Answer:
    chunks: list[bytes] = []
    start = time.perf_counter()
    with client.stream("GET", url, headers={"Accept-Encoding": encoding}) as response:
        response.raise_for_status()
        chunks.extend(response.iter_raw())
    elapsed = time.perf_counter() - start
    return Answer(elapsed, b"".join(chunks), response.headers.get("content-encoding", "identity"))


def alternate(client: httpx.Client, urls: dict[str, str], scrapes: int,
              warmup: int) -> dict[str, dict[str, Scraped]]:
    """``scrapes`` sequential scrapes of each server per encoding, taking turns between the
    servers so that a change in the machine's load hits all of them alike."""
    out: dict[str, dict[str, Scraped]] = {name: {} for name in urls}
    for encoding in ENCODINGS:
        for url in urls.values():
            for _ in range(warmup):
                scrape(client, url, encoding)
        seen: dict[str, list[Answer]] = {name: [] for name in urls}
        for _ in range(scrapes):
            for name, url in urls.items():
                answer = scrape(client, url, encoding)
                # Bodies are large: keep the figures only.
                seen[name].append(Answer(answer.seconds, b"", answer.encoding))
                out[name][encoding] = _summary(encoding, seen[name], len(answer.raw))
                del answer
    return out


def _summary(encoding: str, answers: list[Answer], size: int) -> Scraped:
    served = ",".join(sorted({a.encoding for a in answers}))
    return Scraped(encoding, served, Latency.of([a.seconds for a in answers]), size)


def body_of(client: httpx.Client, url: str) -> bytes:
    """The plain exposition (decompressed if the server gzips anyway)."""
    answer = scrape(client, url, "identity")
    return gzip.decompress(answer.raw) if answer.encoding == "gzip" else answer.raw


def client() -> httpx.Client:
    return httpx.Client(timeout=SCRAPE_TIMEOUT_S)


def wait_for_queries(client: httpx.Client, url: str, queries: int, timeout: float) -> bytes:
    """Scrape until every query shows (its ``spark_streaming_query_info``); the last body."""
    deadline = time.monotonic() + timeout
    while True:
        body = body_of(client, url)
        shown = Census.of(body).queries
        if shown == queries:
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} shows {shown} of {queries} queries after {timeout:.0f} s")
        time.sleep(0.2)
