"""The in-driver Prometheus endpoint, serving an injected registry."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server


class ExporterError(RuntimeError):
    """The /metrics endpoint could not be started; the message says why and what to change."""


@dataclass
class MetricsServer:
    server: Any
    thread: Any
    address: str

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_metrics(registry: CollectorRegistry, address: str, port: int) -> MetricsServer:
    try:
        server, thread = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ExporterError(
                f"metrics port {port} on {address} is already in use; choose another with "
                "SPARKWATCH_METRICS_PORT / spark.sparkwatch.metrics.port / metrics_port= "
                "(0 picks a free port)"
            ) from None
        raise ExporterError(f"cannot serve /metrics on {address}:{port}: {exc}") from None
    return MetricsServer(server, thread, address)
