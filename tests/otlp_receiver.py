"""A real OTLP metrics receiver for the tests (no OpenTelemetry Collector is installable here):
OTLP/HTTP (``POST /v1/metrics``, protobuf, gzip or not) and OTLP/gRPC (``MetricsService.Export``),
both decoding ``ExportMetricsServiceRequest`` with ``opentelemetry-proto``. It keeps every request
with its headers and flattens the points for assertions."""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from bench.local import QuietHandler, free_port
from tests.support import wait_for


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    return getattr(v, which) if which else None


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@dataclass(frozen=True)
class Point:
    """One data point as received, with what it came with."""

    name: str
    kind: str
    """sum, gauge or histogram"""
    unit: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    value: float | None = None
    monotonic: bool = False
    temporality: int = 0
    start_ns: int = 0
    time_ns: int = 0
    count: int = 0
    sum: float = 0.0
    bucket_counts: tuple[int, ...] = ()
    bounds: tuple[float, ...] = ()
    scope: str = ""


def flatten(request: Any) -> list[Point]:
    out = []
    for rm in request.resource_metrics:
        res = attributes(rm.resource.attributes)
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                common = {"name": m.name, "kind": kind, "unit": m.unit, "resource": res,
                          "scope": sm.scope.name}
                if kind in ("sum", "gauge"):
                    data = getattr(m, kind)
                    for p in data.data_points:
                        number = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                        out.append(Point(
                            **common, attributes=attributes(p.attributes), value=number,
                            monotonic=kind == "sum" and m.sum.is_monotonic,
                            temporality=m.sum.aggregation_temporality if kind == "sum" else 0,
                            start_ns=p.start_time_unix_nano, time_ns=p.time_unix_nano))
                elif kind == "histogram":
                    for p in m.histogram.data_points:
                        out.append(Point(
                            **common, attributes=attributes(p.attributes), count=p.count,
                            sum=p.sum, bucket_counts=tuple(p.bucket_counts),
                            bounds=tuple(p.explicit_bounds),
                            temporality=m.histogram.aggregation_temporality,
                            start_ns=p.start_time_unix_nano, time_ns=p.time_unix_nano))
    return out


@dataclass
class Received:
    """Every request a receiver decoded, in order, with its (lower-cased) headers."""

    requests: list[tuple[dict[str, str], Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, headers: dict[str, str], request: Any) -> None:
        with self.lock:
            self.requests.append(({k.lower(): v for k, v in headers.items()}, request))

    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def last_points(self) -> list[Point]:
        with self.lock:
            return flatten(self.requests[-1][1]) if self.requests else []

    def last_headers(self) -> dict[str, str]:
        with self.lock:
            return dict(self.requests[-1][0]) if self.requests else {}

    def latest(self, name: str, **attrs: Any) -> list[Point]:
        """Points of ``name`` with these attributes in the newest request that has any."""
        with self.lock:
            requests = list(self.requests)
        for _, request in reversed(requests):
            found = [p for p in flatten(request) if p.name == name
                     and all(p.attributes.get(k) == v for k, v in attrs.items())]
            if found:
                return found
        return []

    def wait(self, predicate: Any, timeout: float = 30, what: str = "an OTLP export") -> None:
        wait_for(predicate, timeout, what)


class _Handler(QuietHandler):
    received: Received
    status = 200

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        if self.path != "/v1/metrics":
            self.send_error(404)
            return
        request = metrics_service_pb2.ExportMetricsServiceRequest()
        request.ParseFromString(body)
        self.received.add(dict(self.headers.items()), request)
        reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        self.answer(self.status, reply, "application/x-protobuf")


@contextmanager
def http_receiver() -> Iterator[tuple[str, Received]]:
    """(base endpoint for OTEL_EXPORTER_OTLP_ENDPOINT, what it received)."""
    received = Received()
    handler = type("Handler", (_Handler,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()


class _Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, received: Received) -> None:
        self.received = received

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the service's name
        self.received.add(dict(context.invocation_metadata()), request)
        return metrics_service_pb2.ExportMetricsServiceResponse()


@contextmanager
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    received = Received()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(_Metrics(received), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None).wait(5)


__all__ = ["Point", "Received", "flatten", "grpc_receiver", "http_receiver"]
