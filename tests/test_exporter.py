"""The in-driver /metrics server stops at once when told: detach() has no time left by the
time it stops it, so a stop that waits for a poll interval overruns detach's deadline."""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from sparkwatch.listener.exporter import serve_metrics


def test_stopping_right_after_a_scrape_takes_milliseconds_and_closes_the_port() -> None:
    for _ in range(3):
        server = serve_metrics(CollectorRegistry(), "127.0.0.1", 0)
        port = server.port
        # Just answered a scrape: a polling loop has its whole interval ahead of it.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert response.status == 200
        start = time.monotonic()
        server.stop()
        took = time.monotonic() - start
        assert took < 0.1, took
        assert not server.thread.is_alive()
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
            pass
