"""Local resources that the benchmarks, the tests and the scripts all need: free ports, a
local Spark session and a local stub HTTP server with its handler.

One place, so that every harness starts Spark the same way (two cores, two shuffle partitions,
no UI, bound to loopback: what the tests and the benchmark figures assume).
"""

from __future__ import annotations

import http.server
import os
import socket
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

LOCAL_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
}


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the caller binds it soon after; a race we accept)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def local_spark(app_name: str, conf: Mapping[str, str] | None = None,
                log_level: str = "ERROR") -> Any:
    """``local[2]`` SparkSession with :data:`LOCAL_CONF` plus ``conf``; Python workers run this
    interpreter (the one that has pandas and pyarrow)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    return session


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """The handler of a local stub server (a gate in front of a collector, an OTLP receiver): it
    answers with :meth:`answer` and logs nothing (its test or benchmark reports what matters)."""

    def answer(self, status: int, body: bytes, content_type: str = "application/json",
               headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in {**(headers or {}), "Content-Type": content_type}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


@contextmanager
def served(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """``handler`` served on 127.0.0.1 from a thread, each request in a daemon thread of its own
    (one a test leaves hanging never holds up the shutdown): the base URL, ``http://host:port``.
    Shut down and closed on leaving."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="stub-http", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
